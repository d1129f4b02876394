/**
 * The `fencepost` command: a thin adapter over the core library. It parses and validates every option before it
 * starts anything, wires the clients, the clock and the events, and maps outcomes to exit codes.
 */
import { systemClock } from '../core/clock';
import type { BillingSummary } from '../apps/billing/night';
import { audit, type AuditReport } from '../apps/billing/audit';
import { ConfigError, FencepostError, InfrastructureError } from '../core/errors';
import { Events, type EventListener } from '../core/events';
import { DEFAULT_BUCKET, DEFAULT_TABLE_PREFIX, tableNames } from '../core/schema';
import { awsClients, localClients, type Clients, type Endpoints } from '../core/aws/clients';
import { runChaos } from '../harness/chaos';
import { provision } from '../local/provision';
import { startEmbeddedStack, type EmbeddedStack } from '../local/stack';
import { playStory, storyLease, storyTable } from '../harness/story';
import { runDirect, runStepFunctions } from './engines';
import { HELP, localBanner } from './help';
import { parseSimulate, simulate } from './simulate';
import { instrumentRun } from './instrumentation';
import {
  EXIT,
  auditOptions,
  bumpOptions,
  chaosOptions,
  electOptions,
  handoverOptions,
  leaderOptions,
  localOptions,
  parseCommand,
  runOptions,
  storyOptions,
  sweepOptions,
  type CommandName,
  type StoreTarget,
} from './options';
import { auditTable, chaosTable, progressBar, summaryTable } from './progress';
import { bumpCommand, sweepCommand } from './sweep';
import { electCommand, handoverCommand, leaderCommand } from './elect';

type Out = (text: string) => void;
const out: Out = (t) => process.stdout.write(t + '\n');
const err: Out = (t) => process.stderr.write(t + '\n');
type Values = Record<string, string | boolean | undefined>;

/** Fans events out to listeners until closed; what arrives after close() goes to `late`, if given. */
function eventStream(late?: EventListener): { listener: EventListener; on(l: EventListener): void; close(): void } {
  const listeners: EventListener[] = [];
  let open = true;
  return {
    listener: (e) => {
      if (!open) return late?.(e);
      for (const l of listeners) l(e);
    },
    on: (l) => void listeners.push(l),
    close: () => {
      open = false;
    },
  };
}

/**
 * Start the embedded stack unless endpoints were given, provision the tables and the bucket, and hand the body
 * clients for them; everything is stopped and closed afterwards, whatever happens.
 */
async function withStores<T>(target: StoreTarget, body: (clients: Clients, endpoints: Endpoints) => Promise<T>): Promise<T> {
  let stack: EmbeddedStack | undefined;
  if (!target.endpoints) stack = await startEmbeddedStack();
  const endpoints = target.endpoints ?? stack!.endpoints;
  const clients = localClients(endpoints);
  try {
    await provision(clients.raw, clients.s3, target.tablePrefix, target.bucket).catch((e) => {
      throw new InfrastructureError(`cannot reach the stores at ${endpoints.dynamodb} and ${endpoints.s3}: ${(e as Error).message}`, { cause: e });
    });
    return await body(clients, endpoints);
  } finally {
    clients.destroy();
    await stack?.stop();
  }
}

function run(values: Values): Promise<number> {
  const o = runOptions(values);
  return withStores(o, async (clients, endpoints) => {
    const events = new Events(o.worker, systemClock);
    // Events can still arrive after the engine has returned: the local Step Functions runner starts a queued Map
    // iteration after the Map has failed, and that chunk task resumes the lease and reports lease-lost. They
    // describe work that no longer counts, so the stream closes at the summary point and the summary (with
    // --json) is stdout's last line; late events go to stderr only when --events asked for them.
    const stream = eventStream(o.events ? (e) => err(`fencepost run: after the summary: ${JSON.stringify(e)}`) : undefined);
    events.on(stream.listener);
    if (o.events) stream.on((e) => out(JSON.stringify(e)));
    if (!o.json && !o.events) stream.on(progressBar(o.config.invoices));
    // Nothing, unless a module loaded before the CLI instrumented the process (the test harness's faults).
    const { hooks, lambdaCode } = instrumentRun({ worker: o.worker, engine: o.engine, clients, events });
    const deps = { ddb: clients.ddb, s3: clients.s3, tables: tableNames(o.tablePrefix), bucket: o.bucket, clock: systemClock, events };
    const night = { date: o.date, worker: o.worker, config: o.config, chunkConcurrency: o.chunkConcurrency, clients, endpoints, hooks, lambdaCode };
    let summary: BillingSummary;
    try {
      summary = o.engine === 'direct' ? await runDirect(deps, night) : await runStepFunctions(deps, night);
    } finally {
      stream.close(); // the summary point, or the error's
    }
    // Without endpoints the stack is ours alone, so check the night before it goes away.
    const report: AuditReport | undefined = o.audit && !o.endpoints ? await audit(deps, o.date, o.config.invoices) : undefined;
    if (o.json) out(JSON.stringify(report ? { ...summary, audit: report } : summary));
    else if (!o.events) {
      out(summaryTable(summary, report));
      if (report && !report.ok) out(auditTable(report));
    }
    if (report && !report.ok) return EXIT.auditFailed;
    return summary.outcome === 'completed' || summary.outcome === 'already-done' ? EXIT.ok : EXIT.lost;
  });
}

function auditCommand(values: Values): Promise<number> {
  const o = auditOptions(values);
  return withStores(o, async (clients) => {
    const report = await audit({ ddb: clients.ddb, s3: clients.s3, tables: tableNames(o.tablePrefix), bucket: o.bucket }, o.date, o.invoices);
    out(o.json ? JSON.stringify(report) : auditTable(report));
    return report.ok ? EXIT.ok : EXIT.auditFailed;
  });
}

async function local(values: Values): Promise<number> {
  const o = localOptions(values);
  const stack = await startEmbeddedStack(o);
  const clients = localClients(stack.endpoints);
  try {
    await provision(clients.raw, clients.s3, DEFAULT_TABLE_PREFIX, DEFAULT_BUCKET);
  } finally {
    clients.destroy();
  }
  const tables = tableNames(DEFAULT_TABLE_PREFIX);
  out(
    JSON.stringify({
      dynamodbEndpoint: stack.endpoints.dynamodb,
      s3Endpoint: stack.endpoints.s3,
      dataDir: o.dataDir ?? null,
      tables,
      bucket: DEFAULT_BUCKET,
    }),
  );
  err(localBanner(stack.endpoints, tables, DEFAULT_BUCKET));
  await new Promise<void>((resolve) => {
    for (const sig of ['SIGINT', 'SIGTERM'] as const) process.once(sig, () => resolve());
  });
  await stack.stop();
  err('local stack stopped');
  return EXIT.ok;
}

function sweep(values: Values): Promise<number> {
  const o = sweepOptions(values);
  return withStores(o, (clients) => sweepCommand(o, clients, out, err));
}

async function bump(values: Values): Promise<number> {
  const o = bumpOptions(values);
  if (!o.aws) return withStores(o, (clients) => bumpCommand(o, clients, out));
  const clients = awsClients(); // the one command that talks to AWS: the restored table, named explicitly
  try {
    return await bumpCommand(o, clients, out);
  } finally {
    clients.destroy();
  }
}

function chaos(values: Values): Promise<number> {
  const o = chaosOptions(values);
  return withStores(o, async (clients, endpoints) => {
    err(`chaos: ${o.schedules} schedules, seed ${o.seed}, kinds ${o.kinds.join(',')}`);
    const report = await runChaos({
      endpoints,
      clients,
      schedules: o.schedules,
      seed: o.seed,
      kinds: o.kinds,
      workflowShare: o.workflowShare,
      onResult: (r) =>
        err(
          `${r.ok ? 'ok  ' : 'FAIL'} #${r.index} seed ${r.seed} ${r.kind} (${r.engine}, ${r.seconds.toFixed(1)} s): ${r.detail}${r.ok ? '' : `\n      ${r.violations.join('\n      ')}\n      replay: fencepost chaos --seed ${r.seed} --schedules 1 --kinds ${r.kind}`}`,
        ),
    });
    out(o.json ? JSON.stringify({ ...report, results: report.results.filter((r) => !r.ok) }) : chaosTable(report));
    return report.violations === 0 ? EXIT.ok : EXIT.auditFailed;
  });
}

function story(values: Values): Promise<number> {
  const o = storyOptions(values);
  return withStores(o, async (clients, endpoints) => {
    const lease = storyLease(o.timeScale);
    err(`the billing story at time scale ${o.timeScale}: lease ${lease.leaseMs} ms, renew ${lease.renewMs} ms, margin ${lease.marginMs} ms`);
    const result = await playStory(endpoints, clients, o.timeScale, o.json ? undefined : (r) => err(`  ${r.t.toFixed(2)} s  ${r.actor}: ${r.event}`));
    out(o.json ? JSON.stringify(result) : storyTable(result));
    return result.audit.ok ? EXIT.ok : EXIT.auditFailed;
  });
}

function elect(values: Values): Promise<number> {
  const o = electOptions(values);
  return withStores(o, (clients) => electCommand(o, clients, out, err));
}

function leader(values: Values): Promise<number> {
  const o = leaderOptions(values);
  return withStores(o, (clients) => leaderCommand(o, clients, out));
}

function handoverRun(values: Values): Promise<number> {
  const o = handoverOptions(values);
  return withStores(o, (clients) => handoverCommand(o, clients, out, err));
}

const COMMANDS: Record<CommandName, { help: string; run: (values: Values) => Promise<number> }> = {
  run: { help: HELP.run, run },
  audit: { help: HELP.audit, run: auditCommand },
  sweep: { help: HELP.sweep, run: sweep },
  'bump-epochs': { help: HELP.bump, run: bump },
  chaos: { help: HELP.chaos, run: chaos },
  story: { help: HELP.story, run: story },
  local: { help: HELP.local, run: local },
  elect: { help: HELP.elect, run: elect },
  leader: { help: HELP.leader, run: leader },
  handover: { help: HELP.handover, run: handoverRun },
  simulate: { help: HELP.simulate, run: simulate },
};

export async function main(argv: string[]): Promise<number> {
  const [command, ...args] = argv;
  if (command === undefined || ['help', '--help', '-h'].includes(command)) {
    out(HELP.main);
    return command === undefined ? EXIT.usage : EXIT.ok;
  }
  if (!Object.hasOwn(COMMANDS, command)) {
    err(`fencepost: unknown command ${JSON.stringify(command)}; commands are ${Object.keys(COMMANDS).join(', ')} (fencepost --help)`);
    return EXIT.usage;
  }
  const c = COMMANDS[command as CommandName];
  try {
    // simulate takes a scenario name and repeated options (--pause, --sweep): it parses its own arguments.
    const values = command === 'simulate' ? parseSimulate(args) : parseCommand(command as CommandName, args);
    if (values.help) {
      out(c.help);
      return EXIT.ok;
    }
    return await c.run(values);
  } catch (e) {
    if (e instanceof ConfigError) {
      // One line per problem, each naming its option: no header, no stack.
      for (const p of e.problems) err(`fencepost ${command}: ${p}`);
      return EXIT.usage;
    }
    err(`fencepost ${command}: ${e instanceof FencepostError ? e.message : ((e as Error).stack ?? String(e))}`);
    return EXIT.failure;
  }
}
