/**
 * How a run's chunks fit Step Functions' quotas (docs/DESIGN.md "Large runs"). Runs of more chunks than
 * distributedMapAboveChunks run them as a Distributed Map: each chunk is a child execution with its own history,
 * so the parent's history and payload no longer grow with the run. Pure: the checks and the workflow both read it.
 */
import { Duration } from 'aws-cdk-lib';
import { PROCESS_RETRIES, TRANSIENT_RETRIES } from './task-errors';

/** The job execution's own timeout (a run past it fails, and the ExecutionsTimedOut alarm fires). */
export const EXECUTION_TIMEOUT = Duration.hours(2);

/**
 * Step Functions quotas the chunk Map is planned against (https://docs.aws.amazon.com/step-functions/latest/dg/limits.html):
 * 25,000 history events per execution and 256 KiB (262,144 bytes) of input or output per state; an inline Map runs
 * at most 40 iterations at once (https://docs.aws.amazon.com/step-functions/latest/dg/state-map-inline.html), a
 * Distributed Map at most 10,000 child executions
 * (https://docs.aws.amazon.com/step-functions/latest/dg/state-map-distributed.html).
 */
export const SFN_QUOTAS = { historyEvents: 25_000, payloadBytes: 262_144, inlineConcurrency: 40, distributedConcurrency: 10_000 } as const;

/**
 * History events, counted from the event types Step Functions writes
 * (https://docs.aws.amazon.com/step-functions/latest/apireference/API_HistoryEvent.html), each path at its worst:
 * a Lambda task is TaskStateEntered, LambdaFunctionScheduled, LambdaFunctionStarted, LambdaFunctionSucceeded,
 * TaskStateExited (5), and each retry adds Scheduled, Started, Failed/TimedOut (3); a Choice, Wait or Pass state is
 * Entered + Exited (2); an inline Map iteration adds MapIterationStarted + MapIterationSucceeded (2).
 */
export const HISTORY = {
  task: 5 + 3 * TRANSIENT_RETRIES, // 17: every allowed retry of a transient error taken
  preRaiseTask: 5 + 3 * (TRANSIENT_RETRIES + PROCESS_RETRIES), // 29: Prepare, Observe, Claim, RaiseFence also retry a process's death
  passOrChoice: 2,
  mapIteration: 2,
  mapState: 4, // MapStateEntered, MapStateStarted, MapStateSucceeded, MapStateExited
  execution: 2, // ExecutionStarted, ExecutionSucceeded/Failed
} as const;

/** How the chunks run: an inline Map in the run's own execution, or a Distributed Map (a child execution per chunk). */
export type ChunkMapMode = 'inline' | 'distributed';

/** What the plan reads: the run's chunks, how they run, and the claim loop's worst case. */
export interface ChunkMapSettings {
  /** Chunks in one run. */
  readonly chunks: number;
  /** Chunks run at once (the Map's MaxConcurrency). */
  readonly chunkConcurrency: number;
  /** Runs of more chunks than this run them as a Distributed Map; 0: always. */
  readonly distributedMapAboveChunks: number;
  /** How long a lease lasts without renewal, in ms: a claimant waits a whole lease per try. */
  readonly leaseMs: number;
  /** Leases a claimant waits on a live holder before it gives up: with leaseMs, the claim loop's longest wait. */
  readonly claimBudget: number;
  /** The largest output of one chunk invocation, in bytes (JSON): inline, the Map keeps every output in the state. */
  readonly chunkOutputBytes: number;
  /** How long one chunk takes, for the check that a run fits the execution timeout; undefined: not checked. */
  readonly chunkMs?: number;
}

/** How a run's chunks run, and the figures the checks compare with AWS's quotas. */
export interface ChunkMapPlan {
  /** Chunks in one run. */
  readonly chunks: number;
  /** Inline (the chunks run in the job's own execution) or distributed (a child execution per chunk). */
  readonly mode: ChunkMapMode;
  /** Worst-case history of the job execution without its chunks: the longest claim loop and every retry. */
  readonly fixedEvents: number;
  /** Worst-case events one chunk adds to the parent's history when inline: 2 + 17 = 19 (0 when distributed). */
  readonly eventsPerChunk: number;
  /** Worst-case history of the parent execution in this mode. */
  readonly historyEvents: number;
  /** Bytes of the largest state the execution carries: the raise's chunk list, plus (inline) the Map's results. */
  readonly payloadBytes: number;
}

/** A slack for the state around the chunk list: run, observation, claim and raise objects (well under 1 KB today). */
const STATE_RESERVE_BYTES = 8_192;

/** JSON.stringify([0, 1, …, chunks - 1]).length, without building it: each d-digit index is d digits and a comma. */
export function chunkListBytes(chunks: number): number {
  let bytes = 2 - (chunks > 0 ? 1 : 0); // brackets, less the last comma
  for (let d = 1; 10 ** (d - 1) <= chunks - 1 || d === 1; d++) {
    const from = d === 1 ? 0 : 10 ** (d - 1);
    bytes += Math.max(0, Math.min(chunks, 10 ** d) - from) * (d + 1);
  }
  return bytes;
}

/**
 * The plan for a run: chunks above distributedMapAboveChunks run distributed. The history bound: the claim loop
 * waits at most claimBudget leases in Wait states of at least 1 s, so at most ceil(claimBudget × leaseMs / 1000)
 * waits, each followed by an observation (Observe + Choice + Wait), plus one failed claim per lease watched
 * (Claim + Choice, then an observation without a wait).
 */
export function chunkMapPlan(s: Omit<ChunkMapSettings, 'chunkConcurrency' | 'chunkMs'>): ChunkMapPlan {
  const mode: ChunkMapMode = s.chunks > s.distributedMapAboveChunks ? 'distributed' : 'inline';
  const waits = Math.ceil((s.claimBudget * s.leaseMs) / 1000);
  const failedClaims = s.claimBudget + 1;
  const observation = HISTORY.preRaiseTask + HISTORY.passOrChoice;
  const fixedEvents =
    HISTORY.execution +
    HISTORY.preRaiseTask +
    HISTORY.passOrChoice + // Prepare, FirstObservation
    waits * (HISTORY.passOrChoice + observation) +
    observation + // WatchTheLease → Observe → ClaimOrWatch, and the first look
    failedClaims * (HISTORY.preRaiseTask + HISTORY.passOrChoice + observation) + // Claim → Claimed → Observe → ClaimOrWatch
    HISTORY.preRaiseTask +
    HISTORY.passOrChoice + // RaiseFence, AlreadyDoneAtRaise
    HISTORY.mapState +
    2 * (HISTORY.task + HISTORY.passOrChoice); // Complete + Completed, or the failure path's release, Choice and Fail
  const eventsPerChunk = mode === 'inline' ? HISTORY.mapIteration + HISTORY.task : 0;
  // The chunk list as the raise returns it ([0,1,…]); inline, the Map's results (one output each, comma-separated)
  // stay in the state too.
  const resultBytes = 2 + s.chunks * (s.chunkOutputBytes + 1);
  const payloadBytes = STATE_RESERVE_BYTES + chunkListBytes(s.chunks) + (mode === 'inline' ? resultBytes : 0);
  return { chunks: s.chunks, mode, fixedEvents, eventsPerChunk, historyEvents: fixedEvents + s.chunks * eventsPerChunk, payloadBytes };
}

/**
 * The planned run: how long the chunks take one after another, `chunkConcurrency` at a time, each the job's own
 * estimate of a chunk (`chunkDuration`). The chunk timeout would bound it, but as a worst case, not a plan: 200
 * chunks of a 60 s timeout would ask a budget past the history quota (chunkMapPlan).
 */
function plannedRunMs(s: Pick<ChunkMapSettings, 'chunks' | 'chunkConcurrency'> & { readonly chunkMs: number }): number {
  return Math.ceil(s.chunks / Math.max(1, s.chunkConcurrency)) * s.chunkMs;
}

/** How the problems name the setting that makes the chunks, and what to do about too many (e.g. a chunkSize). */
export interface ChunkWording {
  /** e.g. `chunks (2000)`, or `chunkSize (1) makes 1000000 chunks`. */
  readonly subject: string;
  /** e.g. `fewer chunks`, or `raise chunkSize`. */
  readonly fewer: string;
}

/**
 * Every problem with how the chunks would run on AWS, each naming the setting to change first. Assumes chunks,
 * leaseMs and claimBudget are positive integers (checked before).
 */
export function chunkMapProblems(s: ChunkMapSettings, wording?: ChunkWording): string[] {
  const problems: string[] = [];
  if (!Number.isSafeInteger(s.distributedMapAboveChunks) || s.distributedMapAboveChunks < 0) {
    problems.push(`distributedMapAboveChunks must be a non-negative integer (0: always distributed), got ${s.distributedMapAboveChunks}`);
    return problems;
  }
  const words = wording ?? { subject: `chunks (${s.chunks})`, fewer: 'fewer chunks' };
  const plan = chunkMapPlan(s);
  const [limit, where] =
    plan.mode === 'inline'
      ? [
          SFN_QUOTAS.inlineConcurrency,
          `an inline Map (this run's ${plan.chunks} chunks are at most distributedMapAboveChunks, ${s.distributedMapAboveChunks})`,
        ]
      : [SFN_QUOTAS.distributedConcurrency, 'a Distributed Map'];
  if (!Number.isSafeInteger(s.chunkConcurrency) || s.chunkConcurrency < 1 || s.chunkConcurrency > limit) {
    problems.push(`chunkConcurrency must be an integer from 1 to ${limit} for ${where}, got ${s.chunkConcurrency}`);
  }
  if (plan.fixedEvents > SFN_QUOTAS.historyEvents) {
    problems.push(
      `claimBudget (${s.claimBudget}) × leaseMs (${s.leaseMs}) lets the claim loop alone write up to ${plan.fixedEvents} history events (1 s polls), above the ${SFN_QUOTAS.historyEvents} quota`,
    );
  } else if (plan.historyEvents > SFN_QUOTAS.historyEvents) {
    const inlineMax = Math.floor((SFN_QUOTAS.historyEvents - plan.fixedEvents) / (HISTORY.mapIteration + HISTORY.task));
    problems.push(
      `distributedMapAboveChunks (${s.distributedMapAboveChunks}) runs this run's ${plan.chunks} chunks inline, whose history can reach ${plan.historyEvents} events, above the ${SFN_QUOTAS.historyEvents} quota: set it to at most ${inlineMax}`,
    );
  }
  if (plan.payloadBytes > SFN_QUOTAS.payloadBytes) {
    problems.push(
      `${words.subject}, whose list${plan.mode === 'inline' ? ' and inline results' : ''} (about ${plan.payloadBytes} bytes with the rest of the state) exceed the ${SFN_QUOTAS.payloadBytes}-byte state payload quota: ${words.fewer}${plan.mode === 'inline' ? ' or lower distributedMapAboveChunks' : ''}`,
    );
  }
  if (s.chunkMs !== undefined) {
    const runMs = plannedRunMs({ ...s, chunkMs: s.chunkMs });
    const budgetMs = s.claimBudget * s.leaseMs;
    if (runMs > EXECUTION_TIMEOUT.toMilliseconds()) {
      problems.push(
        `chunkConcurrency (${s.chunkConcurrency}) runs ${plan.chunks} chunks in about ${Math.round(runMs / 60_000)} minutes, past the execution's ${EXECUTION_TIMEOUT.toHumanString()} timeout: raise it`,
      );
    } else if (budgetMs < runMs) {
      // A duplicate start waits on the live holder for at most the budget; shorter than the run, it gives up while
      // the run still runs and never sees it DONE (docs/DESIGN.md "A duplicate start on a long run").
      problems.push(
        `claimBudget (${s.claimBudget}) × leaseMs (${s.leaseMs}) = ${budgetMs / 1000} s of waiting is shorter than the planned run, ${runMs / 1000} s (${plan.chunks} chunks, ${Math.max(1, s.chunkConcurrency)} at a time, ${s.chunkMs / 1000} s each): a duplicate start would give up on a run still running; raise claimBudget to at least ${Math.ceil(runMs / s.leaseMs)}, or run more chunks at once`,
      );
    }
  }
  return problems;
}
