/** Help texts. Kept next to the options they describe (lib/cli/options.ts); docs/CLI.md quotes them. */
export const HELP = {
  main: `fencepost: a nightly billing job that runs exactly once in effect, guarded by leases and fencing tokens.

Usage: fencepost <command> [options]

Commands:
  run     bill one night: claim the lease, raise the fence, write the invoices in fenced batches, commit, release
  audit   read the stores and check the invariants (each invoice once, tokens vs fences, sparse index, epochs)
  local   start the embedded local stack (DynamoDB Local + local S3) and print its endpoints

Without --dynamodb-endpoint/--s3-endpoint, run and audit start the embedded stack themselves.
Exit codes: 0 done (by us or already), 1 infrastructure or unexpected error, 2 bad input (nothing written),
            3 this worker lost the lease or was fenced out (the data is safe), 4 an audit found a broken invariant.
Run 'fencepost <command> --help' for its options.`,

  run: `Usage: fencepost run [--date YYYY-MM-DD] [options]

Bills one night. Safe to run twice, or on several workers at once: one holds the lease, the fence refuses the rest.

  --date YYYY-MM-DD          the night to bill (default: today, UTC)
  --worker ID                this holder's name (default: <hostname>-<pid>)
  --invoices N               invoices in the night (default 50000)
  --chunk-size N             invoices per chunk (default 5000)
  --puts-per-transaction N   invoice puts per transaction, next to the fence check (default 99, at most 99;
                             other values need --engine direct)
  --lease-ms N               lease length (default 10000)
  --renew-ms N               renewal interval, at most lease/3 (default 3000)
  --margin-ms N              stop time = sent_at + lease - margin (default 2000)
  --claim-budget N           observations of a live holder before giving up (default 30)
  --engine E                 stepfunctions (default): the synthesized state machine, run locally, each task
                             calling the same Lambda handler the cloud runs; direct: the core library in-process
  --chunk-concurrency N      chunk tasks in flight at once (stepfunctions engine; default 1)
  --dynamodb-endpoint URL    use these stores (with --s3-endpoint) instead of the embedded stack
  --s3-endpoint URL
  --table-prefix P           table names are P + locks|jobs|invoices (default fencepost-)
  --bucket B                 manifest bucket (default fencepost-manifests)
  --json                     print one JSON summary object at the end (and nothing else on stdout)
  --events                   print one JSON line per event as it happens
  --no-audit                 skip the audit after a run on the embedded stack

Exit: 0 completed or already done; 3 lost the lease or fenced out; 2 bad input; 1 other failure; 4 audit failed.`,

  audit: `Usage: fencepost audit --date YYYY-MM-DD [--invoices N] [--dynamodb-endpoint URL --s3-endpoint URL] [--table-prefix P] [--bucket B] [--json]

Checks invariants 1-4 of docs/DESIGN.md: each invoice once and none missing when DONE; no token above the fence
it met (DynamoDB and the S3 manifest); the sparse index holds exactly the RUNNING rows; the lock epoch is at
least every token seen. Exit 0 only when all hold, 4 otherwise.`,

  local: `Usage: fencepost local [--data-dir D] [--dynamodb-port N] [--s3-port N]

Starts DynamoDB Local (in memory, or on D) and the local S3 endpoint on loopback, creates the tables and the
bucket, prints the endpoints as JSON, and stays up until Ctrl-C. Point several 'fencepost run' processes at it
to watch a takeover for real.`,
};
