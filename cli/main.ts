/**
 * The repository's `fencepost` command (bin/fencepost.ts): a thin adapter over the core library. It parses and
 * validates every option before it starts anything, wires the clients, the clock and the events, and maps outcomes to
 * exit codes. The package ships the user's part of it only (lib/cli/user.ts, lib/cli/bin.ts): no billing app, no harness.
 */
import { systemClock } from '../lib/core/clock';
import { billingDeps, type BillingSummary } from '../apps/billing/night';
import { audit, auditDeps, type AuditReport } from '../apps/billing/audit';
import { Events, type EventListener } from '../lib/core/events';
import { runChaos } from '../verify/chaos/chaos';
import { playStory, storyLease, storyTable, takeoverLease } from '../verify/story';
import { runDirect, runStepFunctions } from './engines';
import { HELP } from './help';
import { USER_COMMANDS, dispatch, withExistingStores, withStores, type Command, type Values } from '../lib/cli/user';
import { tableNames } from '../lib/core/schema';
import { BILLING_TABLES, billingTables } from '../apps/billing/schema';
import { parseSimulate, simulate } from './simulate';
import { instrumentRun } from './instrumentation';
import {
  EXIT,
  auditOptions,
  chaosOptions,
  electOptions,
  handoverOptions,
  leaderOptions,
  runOptions,
  storyOptions,
  sweepOptions,
  parseCommand,
  type CommandName,
} from './options';
import { auditTable, chaosTable, progressBar, summaryTable } from './progress';
import { sweepCommand } from './sweep';
import { electCommand, handoverCommand, leaderCommand } from './elect';

type Out = (text: string) => void;
const out: Out = (t) => process.stdout.write(t + '\n');
const err: Out = (t) => process.stderr.write(t + '\n');

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

/** The repository's commands run the billing app: its invoice table is provisioned beside the library's two. */
const billingStores: typeof withStores = (target, body) => withStores(target, body, BILLING_TABLES);

function run(values: Values): Promise<number> {
  const o = runOptions(values);
  return billingStores(o, async (clients, endpoints) => {
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
    const tables = billingTables(o.tablePrefix);
    const deps = billingDeps(clients, tables, o.bucket, systemClock, events);
    const night = {
      date: o.date,
      worker: o.worker,
      config: o.config,
      chunkConcurrency: o.chunkConcurrency,
      clients,
      endpoints,
      tables,
      bucket: o.bucket,
      hooks,
      lambdaCode,
    };
    let summary: BillingSummary;
    try {
      summary = o.engine === 'direct' ? await runDirect(deps, night) : await runStepFunctions(deps, night);
    } finally {
      stream.close(); // the summary point, or the error's
    }
    // Without endpoints the stack is ours alone, so check the night before it goes away.
    const report: AuditReport | undefined =
      o.audit && !o.endpoints ? await audit(auditDeps(clients, tables, o.bucket), o.date, o.config.invoices) : undefined;
    if (o.json) out(JSON.stringify(report ? { ...summary, audit: report } : summary));
    else if (!o.events) {
      out(summaryTable(summary, report));
      if (report && !report.ok) out(auditTable(report));
    }
    if (report && !report.ok) return EXIT.auditFailed;
    return summary.outcome === 'completed' || summary.outcome === 'already-done' ? EXIT.ok : EXIT.lost;
  });
}

/** Reads only: the stores it audits must exist (a mistyped prefix is refused, never created). */
function auditCommand(values: Values): Promise<number> {
  const o = auditOptions(values);
  const tables = billingTables(o.tablePrefix);
  const needs = { tables: Object.values(tables), bucket: o.bucket, namedBy: '--table-prefix and --bucket' };
  return withExistingStores(o, needs, async (clients) => {
    const report = await audit(auditDeps(clients, tables, o.bucket), o.date, o.invoices);
    out(o.json ? JSON.stringify(report) : auditTable(report));
    return report.ok ? EXIT.ok : EXIT.auditFailed;
  });
}

function sweep(values: Values): Promise<number> {
  const o = sweepOptions(values);
  return billingStores(o, (clients) => sweepCommand(o, clients, out, err));
}

function chaos(values: Values): Promise<number> {
  const o = chaosOptions(values);
  return billingStores(o, async (clients, endpoints) => {
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
  return billingStores(o, async (clients, endpoints) => {
    const lease = storyLease(o.timeScale);
    const c = takeoverLease(o.timeScale);
    err(
      `the billing story at time scale ${o.timeScale}: lease ${lease.leaseMs} ms, renew ${lease.renewMs} ms, margin ${lease.marginMs} ms (C: ${c.leaseMs}, ${c.renewMs}, ${c.marginMs})`,
    );
    const result = await playStory(endpoints, clients, o.timeScale, o.json ? undefined : (r) => err(`  ${r.t.toFixed(2)} s  ${r.actor}: ${r.event}`));
    out(o.json ? JSON.stringify(result) : storyTable(result));
    return result.audit.ok ? EXIT.ok : EXIT.auditFailed;
  });
}

function elect(values: Values): Promise<number> {
  const o = electOptions(values);
  return billingStores(o, (clients) => electCommand(o, clients, out, err));
}

/** Reads only: the lock and job tables must exist. */
function leader(values: Values): Promise<number> {
  const o = leaderOptions(values);
  const { locks, jobs } = tableNames(o.tablePrefix);
  return withExistingStores(o, { tables: [locks, jobs], namedBy: '--table-prefix' }, (clients) => leaderCommand(o, clients, out));
}

function handoverRun(values: Values): Promise<number> {
  const o = handoverOptions(values);
  return billingStores(o, (clients) => handoverCommand(o, clients, out, err));
}

/** The parser every command but simulate uses: its options from cli/options.ts. */
const common = (command: CommandName) => (args: string[]) => parseCommand(command, args);

const COMMANDS: Record<CommandName, Command> = {
  run: { help: HELP.run, run, parse: common('run') },
  audit: { help: HELP.audit, run: auditCommand, parse: common('audit') },
  sweep: { help: HELP.sweep, run: sweep, parse: common('sweep') },
  'bump-epochs': USER_COMMANDS['bump-epochs'],
  chaos: { help: HELP.chaos, run: chaos, parse: common('chaos') },
  story: { help: HELP.story, run: story, parse: common('story') },
  local: USER_COMMANDS.local,
  elect: { help: HELP.elect, run: elect, parse: common('elect') },
  leader: { help: HELP.leader, run: leader, parse: common('leader') },
  handover: { help: HELP.handover, run: handoverRun, parse: common('handover') },
  // simulate takes a scenario name and repeated options (--pause, --sweep): it parses its own arguments.
  simulate: { help: HELP.simulate, run: simulate, parse: parseSimulate },
};

export function main(argv: string[]): Promise<number> {
  return dispatch(COMMANDS, HELP.main, argv);
}
