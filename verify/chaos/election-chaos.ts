/**
 * The fault suite's election schedules (`fencepost chaos --kinds election`; docs/DESIGN.md "The fault suite"): 3-5
 * real `fencepost elect` candidates campaign for one role on the schedule's own tables, and whoever leads appends
 * entries stamped with its epoch to the role's ledger, while 1-3 real faults hit them:
 *
 *   pause-in-gap  the leader stops itself (SIGSTOP) right after the check of its k-th append, before sending it
 *                 (`sigstop:append:<k>`, verify/chaos/faults.ts); continued 1.5-3 leases after its `fault` event and
 *                 never before its successor's first append has been seen (a candidate joins if nobody is left to
 *                 succeed it), so that its pending append meets the raised fence every time
 *   pause         SIGSTOP of the leader from outside at a random moment; continued 1.5-3 leases later
 * (a leader fault whose leader ended or was deposed on its own before its moment hits the next leader instead)
 *   kill-leader   SIGKILL of the leader
 *   kill-middle   SIGKILL of a candidate with a live one on either side: its successor must find it gone and watch
 *                 the next lower one
 *   kill-several  SIGKILL of 2-3 candidates at once (the leader among them or not), leaving at least one
 *   resign        SIGTERM of the leader: it resigns and its successor leads at once
 *   late-joiner   a candidate that joins the queue while the others run
 * and some candidates run with a wall clock 3 s fast or stepped back 3 s (libfaketime, counted as clock faults).
 *
 * Once the faults are over and a leader has appended 3 entries after the last one (bounded: never getting a leader
 * again is a liveness violation), every candidate is sent SIGTERM, and the ledger and the event streams are checked
 * by `electionViolations`: the ledger checker (lib/election/epoch-fence.ts `ledgerViolations`: epochs only grow along the
 * versions, no version twice, no gap, so no write of a deposed leader after its successor's first), one `leading`
 * per epoch and one announcer per epoch in the ledger, every acknowledged append in the ledger, a leader paused in the
 * check-to-append gap and continued after its successor wrote refused (or deposed with nothing landed), a killed
 * middle candidate's successor watching ever lower predecessors, and exit codes 0, 3 or killed.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { systemClock } from '../../lib/core/clock';
import { ledgerKey } from '../../lib/election/election';
import { DynamoLedgerStore } from '../../lib/core/aws/ledger-store';
import { EpochFence, ledgerViolations, type LedgerEntry, type LedgerHead } from '../../lib/election/epoch-fence';
import { tableNames } from '../../lib/core/schema';
import { provision } from '../../lib/local/provision';
import { prng } from '../../lib/core/prng';
import type { ChaosOptions, FakeClock, ScheduleResult } from './chaos';
import { startProcess, type SeenEvent, type WorkerProcess } from './worker-process';

/** The role every schedule's candidates campaign for (each schedule has its own tables). */
const ROLE = 'r';

/** The faults an election schedule draws from (the counts in the report use these names). */
type ElectionFault = 'pause-in-gap' | 'pause' | 'kill-leader' | 'kill-middle' | 'kill-several' | 'resign' | 'late-joiner';

/** The draw: the pause in the gap twice as likely as each other fault (it is the one only the fence can answer). */
const DRAW: readonly ElectionFault[] = [
  'pause-in-gap',
  'pause-in-gap',
  'pause',
  'kill-leader',
  'kill-middle',
  'kill-several',
  'resign',
  'late-joiner',
];
const KILLS: readonly ElectionFault[] = ['kill-leader', 'kill-middle', 'kill-several'];

/** Live candidates a fault needs in the queue (so a successor exists); fewer, and a candidate joins first. */
const NEEDS: Record<ElectionFault, number> = {
  'pause-in-gap': 2,
  pause: 2,
  'kill-leader': 2,
  'kill-middle': 3,
  'kill-several': 3,
  resign: 2,
  'late-joiner': 0,
};

/** One candidate process as the checker sees it once it has exited. */
export interface CandidateRun {
  readonly name: string;
  /** Its `--events` lines, with the parent's time of arrival. */
  readonly events: readonly SeenEvent[];
  readonly exitCode: number | null;
  readonly signal: NodeJS.Signals | null;
  /** The schedule sent it SIGKILL. */
  readonly killed: boolean;
  /** When the schedule continued it after it had stopped itself between a check and an append (the parent's clock). */
  readonly gapResumedAtMs?: number;
  /** The schedule sent it SIGTERM while it led (the `resign` fault). */
  readonly resignAsked?: boolean;
  /** Its `--json` summary's outcome (resigned, stopped, deposed), when it printed one. */
  readonly outcome?: string;
  /** The end of its stderr, for a bad exit. */
  readonly stderrTail?: string;
}

const epochOfRun = (r: Pick<CandidateRun, 'events'>): number | undefined => {
  const e = r.events.find((x) => x.event === 'leading');
  return e === undefined ? undefined : Number(e.epoch);
};

/**
 * Every violation of an election schedule, one sentence each, from the role's ledger and the candidates' runs.
 * Pure, so that it can be shown to fail on a planted ledger (test/process/faults.test.ts).
 */
export function electionViolations(entries: readonly LedgerEntry[], head: LedgerHead, runs: readonly CandidateRun[]): string[] {
  const problems = ledgerViolations(entries, head).map((p) => `ledger: ${p}`);
  // One leading per epoch, one epoch per candidate.
  const announcers = new Map<number, string[]>();
  for (const r of runs) {
    const leads = r.events.filter((e) => e.event === 'leading');
    if (leads.length > 1) problems.push(`${r.name} announced leading ${leads.length} times`);
    for (const e of leads) announcers.set(Number(e.epoch), [...(announcers.get(Number(e.epoch)) ?? []), r.name]);
  }
  for (const [epoch, names] of announcers) if (names.length > 1) problems.push(`epoch ${epoch} was announced by ${names.join(' and ')}`);
  // Every epoch in the ledger announced by exactly one candidate, and written by it.
  for (const epoch of new Set(entries.map((e) => e.epoch))) {
    const names = announcers.get(epoch) ?? [];
    if (names.length !== 1) problems.push(`the ledger holds epoch ${epoch}, announced by ${names.length} candidates`);
    const others = entries.filter((e) => e.epoch === epoch && names.length === 1 && e.writer !== names[0]);
    if (others.length > 0) problems.push(`epoch ${epoch} (${names[0]}'s) wrote version ${others[0].version} as ${others[0].writer}`);
  }
  const byVersion = new Map(entries.map((e) => [e.version, e]));
  for (const r of runs) {
    const epoch = epochOfRun(r);
    const appended = r.events.filter((e) => e.event === 'appended');
    // Nothing acknowledged was lost.
    for (const a of appended) {
      const e = byVersion.get(Number(a.version));
      if (e === undefined || e.epoch !== Number(a.epoch) || e.writer !== r.name)
        problems.push(`${r.name}'s acknowledged append (epoch ${a.epoch}, version ${a.version}) is not in the ledger`);
    }
    // Nothing landed that its writer did not learn of, but the one append a kill cut short.
    const acked = new Set(appended.map((a) => Number(a.version)));
    const unacked = epoch === undefined ? [] : entries.filter((e) => e.epoch === epoch && !acked.has(e.version));
    if (unacked.length > (r.killed ? 1 : 0))
      problems.push(
        `${r.name} (epoch ${epoch}) has ${unacked.length} entries in the ledger it never acknowledged (versions ${unacked.map((e) => e.version).join(',')})`,
      );
    // A leader continued after its successor wrote: its pending append is refused, or it is deposed with nothing landed.
    if (r.gapResumedAtMs !== undefined && epoch !== undefined) {
      const resumedAt = r.gapResumedAtMs;
      const successor = runs.find(
        (o) => o !== r && o.events.some((e) => e.event === 'appended' && Number(e.epoch) > epoch && e.seenAtMs < resumedAt),
      );
      if (successor) {
        const landed = [...unacked.map((e) => e.version), ...appended.filter((a) => a.seenAtMs > resumedAt).map((a) => Number(a.version))];
        if (landed.length > 0)
          problems.push(
            `${r.name} was paused between a check and an append, continued after ${successor.name}'s first write, and its append landed (versions ${landed.join(',')})`,
          );
        const refused = r.events.some((e) => e.event === 'append-refused' && e.seenAtMs > resumedAt);
        if (!refused && r.exitCode !== 3)
          problems.push(
            `${r.name} was paused between a check and an append and continued after ${successor.name}'s first write, but shows no append-refused and exited ${r.exitCode ?? r.signal}`,
          );
      }
    }
    // A waiting candidate only ever watches lower predecessors: a killed one's successor moves to the next lower.
    const gone = r.events.filter((e) => e.event === 'predecessor-gone').map((e) => Number(e.predecessor));
    for (let i = 1; i < gone.length; i++)
      if (gone[i] >= gone[i - 1]) problems.push(`${r.name} watched predecessor ${gone[i]} after ${gone[i - 1]}: not the next lower one`);
    // A leader told to resign resigns (its item deleted, the next leads at once), unless it had been deposed already.
    if (r.resignAsked && r.outcome !== undefined && r.outcome !== 'resigned' && r.outcome !== 'deposed')
      problems.push(`${r.name} was sent SIGTERM while leading and ended ${r.outcome}, not resigned: its candidate item stays until found gone`);
    // Exit codes: 0 (resigned, stopped), 3 (deposed), or killed by the schedule.
    if (r.killed ? r.signal !== 'SIGKILL' && r.exitCode !== 0 && r.exitCode !== 3 : r.signal !== null || (r.exitCode !== 0 && r.exitCode !== 3))
      problems.push(`${r.name} ended with ${r.exitCode ?? r.signal}${r.stderrTail ? ` (${r.stderrTail})` : ''}`);
  }
  return problems;
}

/** A step of the plan: a fault or a refill (a candidate joining so that the next fault has a successor to hand over to). */
interface Step {
  readonly fault: ElectionFault | 'refill';
  /** The candidates the plan expects it to hit (the leader's faults hit whoever leads when they come). */
  readonly targets: readonly string[];
  /** How long a pause lasts, in leases; how many appends of the leader to let pass before acting; and a delay. */
  readonly pauseLeases: number;
  readonly afterAppends: number;
  readonly delayMs: number;
}

interface Candidate {
  readonly name: string;
  readonly w: WorkerProcess;
  readonly gap?: { readonly k: number; readonly pauseLeases: number };
  readonly clock?: 'clock-fast' | 'clock-step-back';
  stopped: boolean;
  killed: boolean;
  terminated: boolean;
  resignAsked?: boolean;
  gapStoppedAtMs?: number;
  gapResumedAtMs?: number;
  resumed?: Promise<void>;
}

class Liveness extends Error {}

/** A candidate's `--json` summary line, if it printed one. */
function summaryOf(w: WorkerProcess): { outcome?: string } | undefined {
  for (const { line } of [...w.other].reverse()) {
    try {
      const parsed = JSON.parse(line) as { outcome?: string };
      if (typeof parsed.outcome === 'string') return parsed;
    } catch {
      /* not the summary */
    }
  }
  return undefined;
}

/** Run one election schedule: its own seed, tables and processes. */
export async function runElectionSchedule(
  o: ChaosOptions,
  index: number,
  seed: number,
  fakeClock?: (offset: string) => FakeClock,
): Promise<ScheduleResult> {
  const t0 = performance.now();
  const random = prng(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)];
  // Its own tables on every run, so that a replay of the seed on the same stack starts from an empty role and ledger.
  const prefix = `e${seed.toString(36)}-${Date.now().toString(36)}-`;
  const violations: string[] = [];
  const faults: Record<string, number> = {};
  const notes: string[] = [];
  const count = (kind: string, n = 1) => void (faults[kind] = (faults[kind] ?? 0) + n);

  // Short leases keep a schedule short; each renewal still has at least 400 ms to be answered before its stop time,
  // so a loaded machine rarely deposes a candidate on its own (the 600 ms leases this replaced left 180 ms).
  const leaseMs = 900 + Math.floor(random() * 501);
  const renewMs = Math.round(leaseMs / 4);
  const marginMs = 150 + Math.floor(random() * 101);
  const everyMs = 40 + Math.floor(random() * 61);
  const initial = 3 + Math.floor(random() * 3);

  // The plan, on a simulated queue (names in sequence order): who leads when each fault comes, so that the pause in
  // the gap can be armed in that candidate's process when it starts. Even seeds open with it, odd seeds with a kill
  // (a replay of one seed draws the same), so that a few schedules cover both.
  const queue = Array.from({ length: initial }, (_, i) => `C${i}`);
  let joined = initial;
  const steps: Step[] = [];
  const gaps = new Map<string, { k: number; pauseLeases: number }>();
  const nFaults = 1 + Math.floor(random() * 3);
  for (let i = 0; i < nFaults; i++) {
    const fault: ElectionFault = i > 0 ? pick(DRAW) : seed % 2 === 0 ? 'pause-in-gap' : pick(KILLS);
    const base = { pauseLeases: 1.5 + random() * 1.5, afterAppends: 1 + Math.floor(random() * 5), delayMs: Math.floor(random() * everyMs) };
    while (queue.length < NEEDS[fault]) {
      const name = `C${joined++}`;
      queue.push(name);
      steps.push({ fault: 'refill', targets: [name], ...base });
    }
    let targets: string[];
    if (fault === 'late-joiner') {
      targets = [`C${joined++}`];
      queue.push(targets[0]);
    } else if (fault === 'kill-middle') {
      targets = queue.splice(1 + Math.floor(random() * (queue.length - 2)), 1);
    } else if (fault === 'kill-several') {
      const m = 2 + Math.floor(random() * Math.min(2, queue.length - 2));
      targets = [];
      for (let j = 0; j < m; j++) targets.push(...queue.splice(Math.floor(random() * queue.length), 1));
    } else {
      targets = queue.splice(0, 1); // the leader's faults: it leaves the queue (the pauses outlast its lease)
    }
    if (fault === 'pause-in-gap') gaps.set(targets[0], { k: 1 + Math.floor(random() * 6), pauseLeases: base.pauseLeases });
    steps.push({ fault, targets, ...base });
  }

  const candidates: Candidate[] = [];
  const byName = (name: string) => candidates.find((c) => c.name === name);
  const ended = (c: Candidate) => c.w.child.exitCode !== null || c.w.child.signalCode !== null;
  const live = (c: Candidate) => !ended(c) && !c.killed && !c.terminated;
  const epochOf = (c: Candidate) => epochOfRun(c.w);
  const seqOf = (c: Candidate) => c.w.events.find((e) => e.event === 'campaign')?.seq as number | undefined;
  const deposed = (c: Candidate) => c.w.events.some((e) => e.event === 'leader-lost' || e.event === 'append-refused');
  /** The live, running candidates in sequence order (those whose campaign event has come). */
  const queued = () => candidates.filter((c) => live(c) && !c.stopped && seqOf(c) !== undefined).sort((a, b) => (seqOf(a) ?? 0) - (seqOf(b) ?? 0));
  /** Whoever leads and writes now: live, running, announced, not deposed, with an append; the highest epoch. */
  const writingLeader = () =>
    candidates
      .filter((c) => live(c) && !c.stopped && !deposed(c) && c.w.events.some((e) => e.event === 'appended'))
      .sort((a, b) => (epochOf(b) ?? 0) - (epochOf(a) ?? 0))[0];
  // A departure costs its successor at most a lease and a poll per dead item ahead of it; plus process start-ups.
  const livenessMs = () => 15_000 + candidates.length * 2 * leaseMs;
  const until = async (pred: () => boolean, timeoutMs: number): Promise<boolean> => {
    const end = performance.now() + timeoutMs;
    while (!pred()) {
      if (performance.now() > end) return false;
      await sleep(20);
    }
    return true;
  };
  const needLeader = async (why: string): Promise<Candidate> => {
    for (;;) {
      const bound = livenessMs();
      // While candidates remain, one must lead within the bound; once every one has left on its own (deposed: on a
      // loaded machine a short lease can pass), the role has nobody to elect and one joins, as after the faults.
      const nobody = () => !candidates.some((c) => live(c) && !deposed(c));
      if (await until(() => writingLeader() !== undefined || nobody(), bound)) {
        const leader = writingLeader();
        if (leader) return leader;
        const name = `C${joined++}`;
        notes.push(`${name} joined ${why}: every candidate had left on its own`);
        await join(name);
        continue;
      }
      throw new Liveness(`liveness: no leader wrote within ${bound} ms ${why}`);
    }
  };

  const spawn = (name: string): Candidate => {
    const gap = gaps.get(name);
    let clock: Candidate['clock'];
    let fake: FakeClock | undefined;
    if (fakeClock && random() < 0.2) {
      clock = random() < 0.5 ? 'clock-fast' : 'clock-step-back';
      fake = fakeClock(clock === 'clock-fast' ? '+3s' : '+0');
      count(clock);
    }
    const w = startProcess(
      [
        'elect',
        '--dynamodb-endpoint',
        o.endpoints.dynamodb,
        '--s3-endpoint',
        o.endpoints.s3,
        '--table-prefix',
        prefix,
        '--role',
        ROLE,
        '--candidate',
        name,
        '--lease-ms',
        String(leaseMs),
        '--renew-ms',
        String(renewMs),
        '--margin-ms',
        String(marginMs),
        '--every',
        `${everyMs}ms`,
        '--events',
        '--json',
      ],
      { env: fake?.env, faults: gap ? { sigstop: `append:${gap.k}` } : undefined },
    );
    const c: Candidate = { name, w, gap, clock, stopped: false, killed: false, terminated: false };
    candidates.push(c);
    if (fake && clock === 'clock-step-back') {
      let stepped = false;
      w.onEvent((e) => {
        if (!stepped && e.event === 'renew') {
          stepped = true;
          fake.set('-3s'); // its wall clock steps back 3 s, mid-lease
        }
      });
    }
    if (gap) {
      // Stopped by itself right after its check: continued 1.5-3 leases after its fault event, whatever step is on,
      // and never before a successor's first append has been seen, so that its pending append meets the raised fence.
      w.onEvent((e) => {
        if (e.event !== 'fault' || c.gapStoppedAtMs !== undefined) return;
        c.stopped = true;
        c.gapStoppedAtMs = e.seenAtMs;
        count('pause-in-gap');
        c.resumed = (async () => {
          await sleep(Math.max(0, e.seenAtMs + gap.pauseLeases * leaseMs - performance.now()));
          const wrote = await successorWrote(c).catch(
            (err: Error) => void violations.push(`a successor of ${c.name} could not join: ${err.message}`),
          );
          if (wrote === false) violations.push(`liveness: no successor of ${c.name}, stopped in the gap, wrote within ${livenessMs()} ms`);
          if (!ended(c)) c.w.child.kill('SIGCONT');
          c.gapResumedAtMs = performance.now();
          c.stopped = false;
        })();
      });
    }
    return c;
  };
  /**
   * Wait (bounded: liveness) until a candidate of a later epoch than `c`'s has appended. While nobody who could
   * succeed `c` is left (all gone, or deposed leaders of earlier epochs), one joins, as an operator would start one.
   */
  const successorWrote = async (c: Candidate): Promise<boolean> => {
    const epoch = epochOf(c) ?? 0;
    const wrote = () => candidates.some((o) => o !== c && o.w.events.some((x) => x.event === 'appended' && Number(x.epoch) > epoch));
    const mayLead = (o: Candidate) => o !== c && live(o) && (epochOf(o) ?? Infinity) > epoch;
    const end = performance.now() + livenessMs();
    while (!wrote()) {
      if (performance.now() > end) return false;
      if (!candidates.some(mayLead)) {
        const name = `C${joined++}`;
        notes.push(`${name} joined: ${c.name} stopped in the gap with nobody left to succeed it`);
        await join(name);
      }
      await sleep(20);
    }
    return true;
  };
  /** Start a candidate and wait until it has joined the queue, so that the queue's order is the start order. */
  const join = async (name: string): Promise<Candidate> => {
    const c = spawn(name);
    await c.w
      .waitFor((e) => e.event === 'campaign', 60_000)
      .catch((err: Error) => {
        if (!ended(c)) throw err;
      });
    return c;
  };
  /**
   * The queue a kill needs (`n` live candidates, the leader among them), made to happen: while fewer are queued (some
   * left on their own, as a short lease can pass on a loaded machine), one joins, so the kill is injected every time.
   * Bounded: a machine that deposes every newcomer before the kill ends it with nothing injected, and the note says so.
   */
  const queuedAtLeast = async (n: number, why: string): Promise<Candidate[] | undefined> => {
    for (let joins = 0; joins <= 2 * n; joins++) {
      await needLeader(why);
      const q = queued();
      if (q.length >= n) return q;
      const name = `C${joined++}`;
      notes.push(`${name} joined ${why}: ${q.length} queued, ${n} needed`);
      await join(name);
    }
    return undefined;
  };
  /** The moment of a leader fault: after a few more appends of the leader, and a delay shorter than the period. */
  const moment = async (leader: Candidate, step: Step) => {
    const seen = leader.w.events.filter((e) => e.event === 'appended').length;
    await until(
      () => !live(leader) || leader.w.events.filter((e) => e.event === 'appended').length >= seen + step.afterAppends,
      10 * everyMs * step.afterAppends + 5000,
    );
    await sleep(step.delayMs);
  };
  /**
   * A leader to hit, at its moment. One that ended or was deposed on its own meanwhile (a lease lost on a loaded
   * machine) is not hit: the next leader is waited for and hit instead, so the fault is injected every time.
   */
  const leaderAtMoment = async (step: Step, why: string): Promise<Candidate> => {
    for (;;) {
      const leader = await needLeader(why);
      await moment(leader, step);
      if (live(leader) && !leader.stopped && !deposed(leader)) return leader;
      notes.push(`${leader.name} ended or was deposed on its own before ${step.fault}: the next leader is hit instead`);
    }
  };
  const takeover = (from: Candidate, at: number, what: string) => {
    // Reported, not checked: the next `leading` after the fault, against the departed leader's last renewal + lease.
    const epoch = epochOf(from) ?? 0;
    const lastRenew = from.w.events.filter((e) => e.event === 'renew' && e.seenAtMs <= at).at(-1)?.seenAtMs;
    return until(() => candidates.some((c) => c.w.events.some((e) => e.event === 'leading' && Number(e.epoch) > epoch)), livenessMs()).then(() => {
      const next = candidates.flatMap((c) => c.w.events).find((e) => e.event === 'leading' && Number(e.epoch) > epoch);
      if (next)
        notes.push(
          `${what}: ${next.worker} led ${Math.round(next.seenAtMs - at)} ms after it` +
            (lastRenew === undefined ? '' : ` (${Math.round(next.seenAtMs - lastRenew)} ms after its last renewal; lease ${leaseMs})`),
        );
    });
  };

  let lastFaultAt = performance.now();
  try {
    await provision(o.clients.raw, o.clients.s3, prefix, `chaos-${prefix.slice(0, -1)}`);
    for (let i = 0; i < initial; i++) await join(`C${i}`);
    for (const step of steps) {
      switch (step.fault) {
        case 'refill':
          await join(step.targets[0]);
          notes.push(`${step.targets[0]} joined to keep a successor`);
          break;
        case 'late-joiner':
          await needLeader('before a late joiner');
          await join(step.targets[0]);
          count('late-joiner');
          notes.push(`late joiner ${step.targets[0]}`);
          break;
        case 'pause-in-gap': {
          const c = byName(step.targets[0]);
          const bound = livenessMs() + gaps.get(step.targets[0])!.k * everyMs * 10;
          const hit =
            c &&
            (await c.w
              .waitFor((e) => e.event === 'fault', bound)
              .then(
                () => true,
                () => false,
              ));
          if (!c || !hit) {
            notes.push(`${step.targets[0]} never stopped in the gap (exit ${c?.w.child.exitCode}): nothing injected`);
            break;
          }
          await c.resumed;
          const epoch = epochOf(c) ?? 0;
          const first = candidates
            .flatMap((o) => o.w.events)
            .filter((e) => e.event === 'appended' && Number(e.epoch) > epoch)
            .sort((x, y) => x.seenAtMs - y.seenAtMs)[0];
          notes.push(
            `${c.name} (epoch ${epoch}) stopped after the check of its append ${c.gap!.k}, continued after ${((c.gapResumedAtMs! - c.gapStoppedAtMs!) / leaseMs).toFixed(1)} leases (at least ${c.gap!.pauseLeases.toFixed(1)})` +
              (first && first.seenAtMs < c.gapResumedAtMs! ? `, after ${first.worker}'s first write` : ', before any successor wrote'),
          );
          break;
        }
        case 'pause': {
          const leader = await leaderAtMoment(step, 'before a pause');
          leader.w.child.kill('SIGSTOP');
          leader.stopped = true;
          const at = performance.now();
          count('pause');
          const next = takeover(leader, at, `${leader.name} (epoch ${epochOf(leader)}) stopped from outside`);
          await sleep(step.pauseLeases * leaseMs);
          leader.w.child.kill('SIGCONT');
          leader.stopped = false;
          notes.push(`${leader.name} continued after ${step.pauseLeases.toFixed(1)} leases`);
          await next;
          break;
        }
        case 'kill-leader':
        case 'resign': {
          const leader = await leaderAtMoment(step, `before ${step.fault}`);
          const at = performance.now();
          if (step.fault === 'resign') {
            leader.w.child.kill('SIGTERM');
            leader.terminated = true;
            leader.resignAsked = true;
          } else {
            leader.w.child.kill('SIGKILL');
            leader.killed = true;
          }
          count(step.fault);
          await takeover(leader, at, `${leader.name} (epoch ${epochOf(leader)}) ${step.fault === 'resign' ? 'resigned (SIGTERM)' : 'killed'}`);
          break;
        }
        case 'kill-middle': {
          const q = await queuedAtLeast(NEEDS['kill-middle'], 'before killing a middle candidate');
          const middle = q?.slice(1, -1) ?? [];
          const target = middle.find((c) => c.name === step.targets[0]) ?? (middle.length > 0 ? pick(middle) : undefined);
          if (!q || !target) {
            notes.push(`no middle candidate to kill (${q?.length ?? queued().length} queued)`);
            break;
          }
          const seq = seqOf(target)!;
          const successor = q[q.indexOf(target) + 1];
          target.w.child.kill('SIGKILL');
          target.killed = true;
          const at = performance.now();
          count('kill-middle');
          // Its successor alone finds it gone (bounded: liveness), and then watches the next lower one (the checker).
          const found = await successor.w
            .waitFor((e) => e.event === 'predecessor-gone' && Number(e.predecessor) === seq, livenessMs())
            .then(
              (e) => e,
              () => undefined,
            );
          if (found)
            notes.push(
              `${target.name} (seq ${seq}) killed mid-queue; ${successor.name} found it ${found.how} after ${Math.round(found.seenAtMs - at)} ms`,
            );
          else if (live(successor))
            violations.push(
              `liveness: ${successor.name} did not find its killed predecessor ${target.name} (seq ${seq}) gone within ${livenessMs()} ms`,
            );
          break;
        }
        case 'kill-several': {
          const q = (await queuedAtLeast(NEEDS['kill-several'], 'before killing several')) ?? queued();
          const chosen = step.targets.map(byName).filter((c): c is Candidate => c !== undefined && q.includes(c));
          for (const c of q) if (chosen.length < 2 && !chosen.includes(c)) chosen.push(c);
          const victims = chosen.slice(0, Math.max(0, q.length - 1));
          if (victims.length < 2) {
            notes.push(`not enough candidates to kill several (${q.length} queued)`);
            break;
          }
          const leader = writingLeader();
          const at = performance.now();
          for (const c of victims) {
            c.w.child.kill('SIGKILL');
            c.killed = true;
          }
          count('kill-several');
          const what = `${victims.map((c) => c.name).join(', ')} killed at once`;
          if (leader && victims.includes(leader)) await takeover(leader, at, what);
          else notes.push(what);
          break;
        }
      }
      lastFaultAt = performance.now();
    }
    await Promise.all(candidates.map((c) => c.resumed));
    lastFaultAt = Math.max(lastFaultAt, ...candidates.map((c) => c.gapResumedAtMs ?? 0));
    if (!candidates.some((c) => live(c))) {
      const name = `C${joined++}`;
      await join(name);
      notes.push(`${name} joined after the faults: nobody was left`);
    }
    // Liveness: once the faults are over, a leader appends 3 entries.
    const bound = livenessMs();
    const wrote3 = () => candidates.some((c) => c.w.events.filter((e) => e.event === 'appended' && e.seenAtMs > lastFaultAt).length >= 3);
    const nobody = () => !candidates.some((c) => live(c) && !deposed(c));
    while (!wrote3()) {
      if (!(await until(() => wrote3() || nobody(), bound)))
        throw new Liveness(`liveness: no leader appended 3 entries within ${bound} ms after the last fault`);
      if (nobody()) {
        const name = `C${joined++}`;
        notes.push(`${name} joined after the faults: every candidate had left on its own`);
        await join(name);
      }
    }
  } catch (err) {
    violations.push(err instanceof Liveness ? err.message : `the schedule could not run: ${(err as Error).message}`);
  } finally {
    for (const c of candidates) if (!ended(c)) c.w.child.kill('SIGCONT');
    for (const c of candidates)
      if (!ended(c)) {
        c.w.child.kill('SIGTERM');
        c.terminated = true;
      }
    await Promise.all(
      candidates.map(async (c) => {
        const code = await Promise.race([c.w.exited, sleep(20_000).then(() => 'hung' as const)]);
        if (code !== 'hung') return;
        violations.push(`${c.name} did not exit within 20 s of SIGTERM`);
        c.w.child.kill('SIGKILL');
        c.killed = true;
        await c.w.exited;
      }),
    );
  }

  const fence = new EpochFence({ ledger: new DynamoLedgerStore(o.clients.ddb, tableNames(prefix).jobs), clock: systemClock }, ledgerKey(ROLE));
  const [entries, head] = await Promise.all([fence.entries(), fence.head()]);
  const runs: CandidateRun[] = candidates.map((c) => ({
    name: c.name,
    events: c.w.events,
    exitCode: c.w.child.exitCode,
    signal: c.w.child.signalCode,
    killed: c.killed,
    gapResumedAtMs: c.gapResumedAtMs,
    resignAsked: c.resignAsked,
    outcome: summaryOf(c.w)?.outcome,
    stderrTail: c.w.stderr.slice(-3).join(' | '),
  }));
  violations.push(...electionViolations(entries, head, runs));

  const epochs = [...new Set(entries.map((e) => e.epoch))];
  const refusals = candidates.reduce((n, c) => n + c.w.events.filter((e) => e.event === 'append-refused').length, 0);
  const leaders = candidates.filter((c) => epochOf(c) !== undefined);
  const clocks = candidates.filter((c) => c.clock).map((c) => `${c.name} ${c.clock === 'clock-fast' ? '3 s fast' : 'stepped back 3 s'}`);
  const exits = candidates.map((c) => `${c.name}:${c.w.child.exitCode ?? c.w.child.signalCode}`).join(' ');
  return {
    index,
    seed,
    kind: 'election',
    engine: 'elect',
    ok: violations.length === 0,
    violations,
    faults,
    takeovers: Math.max(0, leaders.length - 1),
    fencedRejections: refusals,
    seconds: Math.round(performance.now() - t0) / 1000,
    detail:
      `${candidates.length} candidates (lease ${leaseMs}, renew ${renewMs}, margin ${marginMs} ms, every ${everyMs} ms)` +
      (clocks.length > 0 ? `, clocks: ${clocks.join(', ')}` : '') +
      `; faults ${steps.map((s) => s.fault).join(', ')}; ${notes.join('; ')}; ` +
      `leaders' epochs ${leaders.map((c) => `${c.name}=${epochOf(c)}`).join(' ')}, ledger epochs ${epochs.join(',')}; ${entries.length} entries; ${refusals} refused appends; exits ${exits}`,
  };
}
