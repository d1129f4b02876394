/**
 * Help texts, kept next to the options they describe (cli/options.ts). Every default they name is read from the
 * constant the code falls back to, never written again here.
 */
import { LEASE_DEFAULTS, MAX_PUTS_PER_TRANSACTION } from '../lib/core/config';
import { HANDOVER_DEFAULTS } from '../lib/election/handover';
import { DEFAULTS } from '../apps/billing/settings';
import { DEFAULT_BUCKET, DEFAULT_TABLE_PREFIX } from '../lib/core/schema';
import { SWEEPER_DEFAULTS } from '../lib/core/sweeper';
import { CHAOS_DEFAULTS, KINDS } from '../verify/chaos/chaos';
import { STORY_DEFAULTS } from '../verify/story';
import { DEFAULT_ENGINE, ENGINES } from './engines';
import { DEFAULT_CHUNK_CONCURRENCY, LEDGER_EVERY_MS } from './options';

const D = DEFAULTS;
const S = SWEEPER_DEFAULTS;
const [OTHER_ENGINE] = ENGINES.filter((e) => e !== DEFAULT_ENGINE);

export const HELP = {
  main: `fencepost: a nightly billing job that runs exactly once in effect, guarded by leases and fencing tokens.

Usage: fencepost <command> [options]

Commands:
  run     bill one night: claim the lease, raise the fence, write the invoices in fenced batches, commit, release
  audit   read the stores and check the invariants (each invoice once, tokens vs fences, sparse index, epochs)
  sweep   find orphaned claims through the sparse index and re-queue them (liveness only; the fence is the safety)
  bump-epochs   after a point-in-time restore of the lock table: raise every epoch so no token repeats
  chaos   the fault suite: randomized pauses, crashes, duplicate triggers, clock and store faults, all audited
  story   replay the reference's five beats with real processes and print the event table
  simulate   the lease simulator: the reference's scenarios, and what-if questions about your own settings
  elect   campaign for a role; while leading, append entries stamped with the epoch to the role's ledger
  leader  print who leads a role, with which epoch, the queue and the ledger's head
  handover   become a role's single writer: flip the writer lease, wait lease + margin, bump the epoch, write
  local   start the embedded local stack (DynamoDB Local + local S3) and print its endpoints

Without --dynamodb-endpoint/--s3-endpoint, run starts the embedded stack itself. audit, leader and bump-epochs
create nothing: a table or bucket they need that does not exist is refused (exit 2, naming it).
Exit codes: 0 done (by us or already), 1 infrastructure or unexpected error, 2 bad input (nothing written),
            3 this worker lost the lease or was fenced out (the data is safe), 4 an audit found a broken invariant,
            5 the sweeper saw a storm and re-queued nothing.
Run 'fencepost <command> --help' for its options.`,

  run: `Usage: fencepost run [--date YYYY-MM-DD] [options]

Bills one night. Safe to run twice, or on several workers at once: one holds the lease, the fence refuses the rest.

  --date YYYY-MM-DD          the night to bill (default: today, UTC)
  --worker ID                this holder's name (default: <hostname>-<pid>)
  --invoices N               invoices in the night (default ${D.invoices})
  --chunk-size N             invoices per chunk (default ${D.chunkSize})
  --puts-per-transaction N   invoice puts per transaction, next to the fence check (default ${D.putsPerTransaction}, at most ${MAX_PUTS_PER_TRANSACTION};
                             other values need --engine direct)
  --lease-ms N               lease length (default ${D.leaseMs})
  --renew-ms N               renewal interval, at most lease/3 (default ${D.renewMs})
  --margin-ms N              stop time = sent_at + lease - margin (default ${D.marginMs})
  --claim-budget N           leases to wait on a live holder before giving up (default ${D.claimBudget}); a holder
                             still billing the night then ends this run as another-holder (exit 3)
  --engine E                 ${DEFAULT_ENGINE} (default): the synthesized state machine, run locally, each task
                             calling the same Lambda handler the cloud runs; ${OTHER_ENGINE}: the core library in-process
  --chunk-concurrency N      chunk tasks in flight at once (stepfunctions engine; default ${DEFAULT_CHUNK_CONCURRENCY})
  --dynamodb-endpoint URL    use these stores (with --s3-endpoint) instead of the embedded stack
  --s3-endpoint URL
  --table-prefix P           table names are P + locks|jobs|invoices (default ${DEFAULT_TABLE_PREFIX})
  --bucket B                 manifest bucket (default ${DEFAULT_BUCKET})
  --json                     print one JSON summary object at the end (and nothing else on stdout)
  --events                   print one JSON line per event as it happens (with --json, the summary comes last)
  --no-audit                 skip the audit after a run on the embedded stack

Exit: 0 completed or already done; 3 lost the lease, fenced out, or another holder is billing the night;
2 bad input; 1 other failure (a live holder of a night not RUNNING under it included); 4 audit failed.`,

  audit: `Usage: fencepost audit --date YYYY-MM-DD [--invoices N (default ${D.invoices})] [--dynamodb-endpoint URL --s3-endpoint URL] [--table-prefix P] [--bucket B] [--json]

Checks invariants 1-4 of docs/DESIGN.md: each invoice once and none missing when DONE; no token above the fence
it met (DynamoDB and the S3 manifest); the sparse index holds exactly the RUNNING rows; the lock epoch is at
least every token seen. Reads only: a table or the bucket that does not exist is refused (exit 2, naming it),
never created. Exit 0 only when all hold, 4 otherwise.`,

  sweep: `Usage: fencepost sweep --dynamodb-endpoint URL --s3-endpoint URL [--table-prefix P] [--bucket B] [options]

Reads only the sparse index of claimed job rows. For each, it asks the lock item whether the lease is alive
without comparing clocks: a first sighting notes the rvn (or that the lock is free); a second sighting at least
one full lease later that finds it unchanged makes the row an orphan. It starts a billing run for that job, then
records the re-queue with one conditional write (state = RUNNING AND owner_token = :seen AND fence = :seen AND
requeues = :seen) that only counts it: the row stays RUNNING in the index until the new run raises its fence, so a
run that dies first leaves the job to the next sweeps.

  --every D              sweep every D (10s, 500ms, 1m) until Ctrl-C (default: sight, wait one lease, sight, exit)
  --lease-ms N           the lease to wait between sightings when the lock item declares none (default ${S.leaseMs})
  --storm-share F        if more than this share of claimed rows look dead at once, re-queue none (default ${S.stormShare})
  --storm-minimum N      ... and at least this many (default ${S.stormMinimum})
  --max-requeues N       re-queues per sweep at most (default ${S.maxRequeuesPerSweep})
  --max-requeues-per-night N
                         give a night up after N re-queues: its runs keep failing; a person re-arms it (default ${S.maxRequeuesPerRun})
  --no-start-runs        re-queue only; start no billing run
  --run-invoices N, --run-chunk-size N, --run-engine E, --run-renew-ms N, --run-margin-ms N
                         options for the billing runs it starts (their --lease-ms is --lease-ms)
  --json, --events       one JSON summary at the end / one JSON line per event (and the started runs' events)

Exit: 0 swept (and every started run ended DONE), 5 a storm was seen, 1 a started run failed, 2 bad input.`,

  chaos: `Usage: fencepost chaos [--schedules ${CHAOS_DEFAULTS.schedules}] [--seed N] [--kinds ${KINDS.join(',')}] [--workflow-share ${CHAOS_DEFAULTS.workflowShare}] [endpoints…] [--json]

Runs randomized schedules of real faults against real worker processes, each on its own tables, and audits every
one against the invariants (docs/DESIGN.md): SIGSTOP past the lease (inside the check-to-act gap or at a random
event), SIGKILL mid-chunk (recovered by a waiting worker or the sweeper, within the liveness bound), 2-3 runs of one
night at once, a wall clock 3 s fast or stepped back 3 s (libfaketime: apt-get install -y faketime), throttling and
lost-after-applied responses in the SDK, and a sweeper racing a takeover. Prints each failure with the seed that
replays it. Exit 0 only with no violation (4 otherwise).
  election: 3-5 'fencepost elect' candidates; the leader paused (also between its check and an append), killed or
  told to resign, middle candidates killed, late joiners, faked clocks; the role's ledger audited by its checker.`,

  story: `Usage: fencepost story [--time-scale ${STORY_DEFAULTS.timeScale}] [endpoints…] [--json]

Plays the reference's billing story with real processes and prints the event table from the events they emitted:
A holds the job; A freezes (SIGSTOP); B takes over with a higher token and raises the fence; A's late batch is
refused; B dies holding the job (SIGKILL); the sweeper finds the orphan through the sparse index and re-queues it;
C takes over and completes; the lock is released. --time-scale 0.3 runs it with A's and B's leases 0.3 times as long
(C, whose lease nobody waits out, keeps the reference's own at least).`,

  elect: `Usage: fencepost elect --role R [--candidate ID] [--lease-ms N --renew-ms N --margin-ms N] [--entries N]
                      [--every D] [endpoints…] [--events | --json]

Campaigns for role R (docs/ELECTION.md): takes the next sequence number, queues behind the lowest live candidates,
and watches only its predecessor, polling it on its own monotonic clock; a predecessor whose rvn stays unchanged a
full lease is removed. While leading it appends one entry every --every (default ${LEDGER_EVERY_MS / 1000}s) to the role's ledger
in the job table, each stamped with its epoch (its sequence number) through the epoch fence, until --entries are
appended (then it resigns) or SIGINT/SIGTERM (it resigns). A deposed leader's appends are refused by the store.

  --role R          the role to lead (required; A-Z a-z 0-9 . _ -)
  --candidate ID    this candidate's name (default: <hostname>-<pid>)
  --lease-ms N      the candidacy's lease (default ${LEASE_DEFAULTS.leaseMs}); --renew-ms (default ${LEASE_DEFAULTS.renewMs}), --margin-ms (default ${LEASE_DEFAULTS.marginMs})
  --entries N       append N entries while leading, then resign (default: until stopped)
  --every D         time between two appends, like 500ms or 2s (default ${LEDGER_EVERY_MS}ms)
  --events          every event as a JSON line on stdout; --json: one summary line at the end
Exit codes: 0 resigned or stopped, 3 deposed (stop time passed, candidacy found gone, or an append refused), 2 bad input.`,

  leader: `Usage: fencepost leader --role R [endpoints…] [--json]

Prints who leads role R as the store says now (the lowest live candidate: it may be gone and not yet found so),
its epoch, the queue of sequence numbers, the last epoch handed out, and the ledger's head (version and fence).
Reads only: a table that does not exist is refused (exit 2, naming it), never created.`,

  handover: `Usage: fencepost handover --role R [--writer ID] [--lease-ms N --renew-ms N --margin-ms N --wait-margin-ms N]
                         [--entries N] [--every D] [endpoints…] [--events | --json]

Single-writer handover (docs/ELECTION.md): takes the writer lease of role R over at once (conditional on the epoch
it saw), renews it, waits the old writer's lease plus --wait-margin-ms on its own monotonic clock, bumps the epoch in
the ledger it will write, then appends entries like elect. The old writer's renewals fail from the flip, so it stops
by its stop time; the gap between the two writers is at least the wait margin. The defaults are the payment loop's:
lease ${HANDOVER_DEFAULTS.leaseMs} ms, renew ${HANDOVER_DEFAULTS.renewMs} ms, margin ${HANDOVER_DEFAULTS.marginMs} ms (the old writer's right ends at the lease), wait margin ${HANDOVER_DEFAULTS.waitMarginMs} ms.
Exit codes: 0 released or stopped, 3 deposed (flipped away, or an append refused by the fence), 2 bad input.`,

  simulate: `Usage: fencepost simulate --list
       fencepost simulate <scenario> [--json] [--svg FILE] [--png FILE]
       fencepost simulate what-if [--lease 10s] [--renew 3s] [--margin 2s] [--rule clock-free|margin|no-margin]
                          [--pause [W:]4s+15s]... [--crash W@25s]... [--clock W:+3s | W:rate=0.001]... [--poll 500ms]
                          [--sweep lease=5..30 margin=0..5[/STEP]] [--json] [--svg FILE] [--png FILE]

The reference's scenarios, deterministic (docs/SIMULATOR.md). What Fencepost implements runs on the real code on
virtual time and the in-memory stores (main-story, wall-step, ttl-epochs, election, handover, restore, the clock-free
claim rule); what it does not runs on small models (the reference's 3-node lock service, Redis and Redlock, the
clock-comparing claim rules). A scenario prints its event table, its inputs and its checks, each expectation computed
from the inputs (exit 4 if one fails). what-if runs the billing job on a lock item with your settings and faults (A holds first, B
and every worker you name claim by --rule; default pause A:4s+15s) and answers: overlap of two holders, writes
refused by the fence, invoices written twice with and without the fence, the longest time with no owner, and the
earliest safe takeover; a renewal period not below lease - margin is refused. --sweep runs a grid (one row per
setting; invalid cells are named) and says how long it took. --svg/--png write the timeline: held intervals, pauses,
stop times, deadlines, fence raises, refused writes, with a legend and the faults under the title.`,
};
