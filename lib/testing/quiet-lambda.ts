/**
 * Powertools reads its settings from the process's environment when lib/lambda/runtime.ts loads: the explored handlers
 * run in this process, thousands of invocations a minute, so their logs and metrics are held back unless asked for
 * (FENCEPOST_LAMBDA_LOG_LEVEL, as in the local runner). Imported before the handlers (workflow-world.ts).
 *
 * The X-Ray SDK under Powertools' Tracer starts in manual mode: in its default mode it installs async hooks for the
 * whole process when it loads, which made every promise of every world slower (an election schedule took 1.8 times
 * as long). Nothing is traced here either way.
 */
process.env.POWERTOOLS_METRICS_DISABLED ??= 'true';
process.env.POWERTOOLS_TRACE_ENABLED ??= 'false';
process.env.POWERTOOLS_LOG_LEVEL ??= process.env.FENCEPOST_LAMBDA_LOG_LEVEL ?? 'SILENT';
process.env.AWS_XRAY_MANUAL_MODE ??= 'true';
