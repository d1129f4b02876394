/**
 * `fencepost elect`, `fencepost leader` and `fencepost handover`: thin adapters over lib/election/election.ts,
 * lib/election/handover.ts and lib/election/epoch-fence.ts (docs/ELECTION.md). A candidate that leads, and a writer after its
 * handover, append entries to the role's ledger in the job table, each stamped with its epoch, until told to stop.
 *
 * Exit codes as `run`: 0 resigned, released or stopped by a signal; 3 deposed (the stop time came with renewals
 * failing, the candidacy was found gone, or the fence refused an append); 2 bad input; 1 anything else.
 */
import { setTimeout as delay } from 'node:timers/promises';
import { systemClock } from '../lib/core/clock';
import { Election, ledgerKey, observeRole, type ElectionDeps, type ElectionReads, type Leadership } from '../lib/election/election';
import { EpochFence, LedgerWriter } from '../lib/election/epoch-fence';
import { FencedOutError, LeaseLostError, StopTimePassedError } from '../lib/core/errors';
import { Events, type FencepostEvent } from '../lib/core/events';
import { handover, writerLedgerKey, type Writer } from '../lib/election/handover';
import { tableNames } from '../lib/core/schema';
import type { Clients } from '../lib/core/aws/clients';
import { DynamoLedgerStore } from '../lib/core/aws/ledger-store';
import { DynamoLockStore } from '../lib/core/aws/lock-store';
import { instrumentRun } from './instrumentation';
import { EXIT, type ElectOptions, type HandoverOptions, type LeaderOptions, type LedgerWork, type StoreTarget } from './options';

type Out = (text: string) => void;

/** How a candidate's or a writer's run ended. */
type Outcome = 'resigned' | 'released' | 'stopped' | 'deposed';

/** What `--json` prints: one line, the last on stdout. */
interface LedgerSummary {
  readonly role: string;
  readonly name: string;
  outcome: Outcome;
  epoch?: number;
  appended: number;
  firstVersion?: number;
  lastVersion?: number;
  /** Why it was deposed (the error's name and message). */
  reason?: string;
  /** An election's reads, by item (the role item; each predecessor's candidate item). */
  reads?: unknown;
}

/** A human line per event that matters, on stderr; --events prints every event on stdout instead. */
function humanLine(e: FencepostEvent): string | undefined {
  switch (e.event) {
    case 'campaign':
      return `queued with sequence ${e.seq}${e.predecessor === undefined ? ', at the head of the queue' : `, watching ${e.predecessor}`}`;
    case 'predecessor-gone':
      return `predecessor ${e.predecessor} ${e.how === 'resigned' ? 'resigned' : 'stayed silent a full lease and was removed'} (${e.reads} reads)`;
    case 'leading':
      return `leading with epoch ${e.epoch}`;
    case 'claim':
      return `holds the writer lease with epoch ${e.token}`;
    case 'epoch-bumped':
      return `bumped the ledger's fence to epoch ${e.epoch} (at version ${e.version})`;
    case 'appended':
      return `appended version ${e.version} with epoch ${e.epoch}`;
    case 'append-refused':
      return `append of version ${e.version} with epoch ${e.epoch} REFUSED: the fence is at ${e.fence ?? '?'}`;
    case 'leader-lost':
      return `stop time passed with renewals failing: no longer leading (${e.error})`;
    case 'lease-lost':
      return `the lease is gone (now held by ${e.holderNow ?? 'nobody'})`;
    case 'resigned':
      return 'resigned';
    case 'released':
      return 'released the writer lease';
    default:
      return undefined;
  }
}

function eventsFor(name: string, work: LedgerWork, out: Out, err: Out): Events {
  const events = new Events(name, systemClock);
  if (work.events) events.on((e) => out(JSON.stringify(e)));
  else if (!work.json)
    events.on((e) => {
      const line = humanLine(e);
      if (line) err(`${name}: ${line}`);
    });
  return events;
}

/** SIGINT/SIGTERM end the run cleanly (resign, release) instead of killing it. */
function stopSignal(): { signal: AbortSignal; dispose(): void } {
  const controller = new AbortController();
  const stop = () => controller.abort(new Error('stopped by a signal'));
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  return {
    signal: controller.signal,
    dispose: () => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
    },
  };
}

const isDeposed = (e: unknown) => e instanceof FencedOutError || e instanceof LeaseLostError || e instanceof StopTimePassedError;

/** The ledger loop shared by a leader and a writer: append, wait, until `entries` are appended or the signal stops it. */
async function appendEntries(ledger: LedgerWriter, work: LedgerWork, summary: LedgerSummary, signal: AbortSignal): Promise<void> {
  while (work.entries === undefined || ledger.appended < work.entries) {
    if (signal.aborted) return;
    const entry = await ledger.append();
    summary.appended = ledger.appended;
    summary.firstVersion ??= entry.version;
    summary.lastVersion = entry.version;
    if (work.entries !== undefined && ledger.appended >= work.entries) return;
    await delay(work.everyMs, undefined, { signal }).catch(() => undefined);
  }
}

function finish(summary: LedgerSummary, work: LedgerWork, out: Out): number {
  if (work.json) out(JSON.stringify(summary));
  else if (!work.events)
    out(
      `${summary.name} ${summary.outcome}${summary.epoch === undefined ? '' : ` (epoch ${summary.epoch})`}: ${summary.appended} entries appended` +
        (summary.firstVersion === undefined ? '' : `, versions ${summary.firstVersion}-${summary.lastVersion}`) +
        (summary.reason ? `; ${summary.reason}` : ''),
    );
  return summary.outcome === 'deposed' ? EXIT.lost : EXIT.ok;
}

/** What elect and handover both start from: the events, the instrumentation, the lock table, the ledger, the signals. */
function ledgerRun(o: StoreTarget & LedgerWork & { role: string }, name: string, fenceKey: string, clients: Clients, out: Out, err: Out) {
  const tables = tableNames(o.tablePrefix);
  const events = eventsFor(name, o, out, err);
  // Nothing, unless a module loaded before the CLI instruments the process (the test harness's faults).
  const { hooks } = instrumentRun({ worker: name, engine: 'direct', clients, events });
  const deps: ElectionDeps = { locks: new DynamoLockStore(clients.ddb, tables.locks), clock: systemClock, events };
  const fence = new EpochFence({ ledger: new DynamoLedgerStore(clients.ddb, tables.jobs), clock: systemClock }, fenceKey);
  const summary: LedgerSummary = { role: o.role, name, outcome: 'stopped', appended: 0 };
  return { events, hooks, deps, fence, summary, stop: stopSignal() };
}

/** `fencepost elect`: campaign, and while leading append entries to the role's ledger stamped with the epoch. */
export async function electCommand(o: ElectOptions, clients: Clients, out: Out, err: Out): Promise<number> {
  const { events, hooks, deps, fence, summary, stop } = ledgerRun(o, o.candidate, ledgerKey(o.role), clients, out, err);
  let leadership: Leadership | undefined;
  const lost = new AbortController(); // onLost ends the loop at the stop time, not only at the next check
  const reads: ElectionReads = { join: 0, role: 0, predecessors: {} };
  try {
    leadership = await new Election(deps, o.role, o.config).campaign(o.candidate, {
      signal: stop.signal,
      onLost: (e) => lost.abort(e),
      reads,
    });
    summary.epoch = leadership.epoch;
    const guard = {
      check: () => {
        if (lost.signal.aborted) throw lost.signal.reason as Error;
        leadership!.check();
      },
    };
    const head = await fence.head();
    const ledger = new LedgerWriter(fence, guard, leadership.epoch, o.candidate, head.version, { events, hooks });
    await appendEntries(ledger, o, summary, AbortSignal.any([stop.signal, lost.signal]));
    if (lost.signal.aborted) throw lost.signal.reason as Error;
    summary.outcome = (await leadership.resign()) ? 'resigned' : 'deposed';
  } catch (e) {
    if (stop.signal.aborted && !isDeposed(e)) summary.outcome = 'stopped';
    else if (isDeposed(e)) {
      summary.outcome = 'deposed';
      summary.reason = `${(e as Error).name}: ${(e as Error).message}`;
      await leadership?.resign().catch(() => undefined);
    } else throw e;
  } finally {
    stop.dispose();
  }
  summary.reads = reads;
  return finish(summary, o, out);
}

/** `fencepost leader`: who leads the role, with which epoch, the queue, and the ledger's head. */
export async function leaderCommand(o: LeaderOptions, clients: Clients, out: Out): Promise<number> {
  const tables = tableNames(o.tablePrefix);
  const view = await observeRole({ locks: new DynamoLockStore(clients.ddb, tables.locks) }, o.role);
  const ledger = await new EpochFence({ ledger: new DynamoLedgerStore(clients.ddb, tables.jobs), clock: systemClock }, ledgerKey(o.role)).head();
  if (o.json) out(JSON.stringify({ ...view, ledger }));
  else
    out(
      (view.leader === undefined ? `role ${o.role}: nobody campaigns` : `role ${o.role}: led by ${view.leader} with epoch ${view.epoch}`) +
        `; queue [${view.queue.join(', ')}]; last epoch handed out ${view.lastEpoch}; ledger at version ${ledger.version}, fence ${ledger.epoch}`,
    );
  return EXIT.ok;
}

/** `fencepost handover`: become the role's single writer (flip, wait lease + margin, bump), then append entries. */
export async function handoverCommand(o: HandoverOptions, clients: Clients, out: Out, err: Out): Promise<number> {
  const { hooks, deps, fence, summary, stop } = ledgerRun(o, o.writer, writerLedgerKey(o.role), clients, out, err);
  let writer: Writer | undefined;
  try {
    writer = await handover(deps, o.role, o.writer, o.config, fence, { hooks });
    summary.epoch = writer.epoch;
    await appendEntries(writer.ledger, o, summary, stop.signal);
    summary.outcome = (await writer.release()) ? 'released' : 'deposed';
  } catch (e) {
    if (!isDeposed(e)) throw e;
    summary.outcome = 'deposed';
    summary.reason = `${(e as Error).name}: ${(e as Error).message}`;
    await writer?.lease.stopHeartbeat();
  } finally {
    stop.dispose();
  }
  return finish(summary, o, out);
}
