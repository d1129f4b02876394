/** The `fencepost` command as a user runs it: exit codes, the JSON summary, help, and bad input refused with nothing written. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { ListTablesCommand } from '@aws-sdk/client-dynamodb';
import { HeadBucketCommand } from '@aws-sdk/client-s3';
import { localClients } from '../../lib/core/aws/clients';
import { endpoints, namespace, unusedNames } from '../support/stack';
import { exitedAfterOutput, runCli, startWorker, storeArgs, type WorkerOptions } from '../support/worker';
import { main } from '../../cli/main';
import { progressBar } from '../../cli/progress';
import type { FencepostEvent } from '../../lib/core/events';
import { chaosOptions, commandOptions, parseCommand, type CommandName } from '../../cli/options';

async function cli(args: string[], options: WorkerOptions = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = runCli(args, options);
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d) => (stdout += d));
  child.stderr!.on('data', (d) => (stderr += d));
  const code = await exitedAfterOutput(child);
  return { code, stdout, stderr };
}

/** Runs a command with a fresh prefix and bucket, then proves it created neither. */
async function refusedWithNothingWritten(args: string[], message: RegExp): Promise<void> {
  const ep = await endpoints();
  const { prefix, bucket } = unusedNames();
  const r = await cli([...args, '--dynamodb-endpoint', ep.dynamodb, '--s3-endpoint', ep.s3, '--table-prefix', prefix, '--bucket', bucket]);
  assert.equal(r.code, 2, `exit 2 for bad input; stderr: ${r.stderr}`);
  assert.match(r.stderr, message);
  assert.ok(r.stderr.split('\n').filter(Boolean).length <= 6, `a short, clear message, not a stack trace:\n${r.stderr}`);
  assert.equal(r.stdout, '', 'nothing on stdout');
  const clients = localClients(ep);
  try {
    const tables = await clients.raw.send(new ListTablesCommand({}));
    assert.deepEqual(
      (tables.TableNames ?? []).filter((t) => t.startsWith(prefix)),
      [],
      'no table was created',
    );
    await assert.rejects(clients.s3.send(new HeadBucketCommand({ Bucket: bucket })), 'no bucket was created');
  } finally {
    clients.destroy();
  }
}

test('bad input: a malformed date → clear message, exit 2, nothing written', () =>
  refusedWithNothingWritten(['run', '--date', '2026-02-30', '--invoices', '10'], /date 2026-02-30 is not a calendar date/));

test('bad input: --date in the wrong format', () => refusedWithNothingWritten(['run', '--date', '28/09/2026'], /--date must be YYYY-MM-DD/));

test('bad input: --chunk-size 0', () =>
  refusedWithNothingWritten(['run', '--date', '2026-09-28', '--chunk-size', '0'], /--chunk-size must be a positive integer/));

test('bad input: more than 99 puts per transaction', () =>
  refusedWithNothingWritten(['run', '--date', '2026-09-28', '--puts-per-transaction', '100'], /at most 99/));

test('bad input: an unknown option', () =>
  refusedWithNothingWritten(
    ['run', '--date', '2026-09-28', '--chunks', '3'],
    /^fencepost run: unknown option '--chunks' \(see fencepost run --help\)\n$/,
  ));

test("bad input: a negative number is one line naming the option, not Node's three-line parser message", () =>
  refusedWithNothingWritten(['run', '--date', '2026-09-28', '--invoices', '-5'], /^fencepost run: --invoices must be a positive integer, got -5\n$/));

test('bad input: an option given where a value belongs', () =>
  refusedWithNothingWritten(
    ['run', '--worker', '--json', '--date', '2026-09-28'],
    /^fencepost run: --worker needs a value \(a worker ID\), got the option --json instead\n$/,
  ));

test('bad input: a bad --run-* option of sweep is refused before the sweeper writes a re-queue', () =>
  refusedWithNothingWritten(['sweep', '--run-chunk-size', '0'], /^fencepost sweep: --run-chunk-size must be a positive integer, got 0\n$/));

/** main() in this process, for input refused before anything starts: its exit code and its stderr lines. */
async function refusedInProcess(argv: string[]): Promise<{ code: number; lines: string[] }> {
  const lines: string[] = [];
  const write = process.stderr.write;
  process.stderr.write = ((chunk: string | Uint8Array) => (lines.push(...String(chunk).split('\n').filter(Boolean)), true)) as typeof write;
  try {
    return { code: await main(argv), lines };
  } finally {
    process.stderr.write = write;
  }
}

// Endpoints that are never contacted: validation refuses first (sweep requires endpoints, so give them).
const NOWHERE = ['--dynamodb-endpoint', 'http://127.0.0.1:1', '--s3-endpoint', 'http://127.0.0.1:2'];

test('bad input, every option of every command: a missing value, an option where the value belongs, a bad number → exit 2, one line naming the option', async () => {
  const commands = Object.keys(commandOptions) as CommandName[];
  const cases: { argv: string[]; names: string }[] = [];
  for (const command of commands) {
    const base = command === 'sweep' ? NOWHERE : [];
    cases.push({ argv: [command, ...base, '--bogus'], names: "'--bogus'" });
    cases.push({ argv: [command, ...base, 'stray'], names: '"stray"' });
    for (const [name, spec] of Object.entries(commandOptions[command]) as [string, { type: string }][]) {
      if (spec.type === 'boolean') {
        cases.push({ argv: [command, ...base, `--${name}=yes`], names: `--${name}` });
        continue;
      }
      cases.push({ argv: [command, ...base, `--${name}`], names: `--${name}` }); // the value is missing
      cases.push({ argv: [command, ...base, `--${name}`, '--help'], names: `--${name}` }); // an option where the value belongs
      cases.push({ argv: [command, ...base, `--${name}`, '-q'], names: `--${name}` });
    }
  }
  // Integer options: negative, zero, non-integer and non-numeric values (margin-ms and seed may be 0 or negative).
  const ints: [CommandName, string, string[]][] = [
    ['run', 'invoices', []],
    ['run', 'chunk-size', []],
    ['run', 'puts-per-transaction', ['--engine', 'direct']],
    ['run', 'lease-ms', []],
    ['run', 'renew-ms', []],
    ['run', 'claim-budget', []],
    ['run', 'chunk-concurrency', []],
    ['audit', 'invoices', ['--date', '2026-09-28']],
    ['sweep', 'lease-ms', NOWHERE],
    ['sweep', 'storm-minimum', NOWHERE],
    ['sweep', 'max-requeues', NOWHERE],
    ['sweep', 'run-invoices', NOWHERE],
    ['sweep', 'run-chunk-size', NOWHERE],
    ['sweep', 'run-renew-ms', NOWHERE],
    ['bump-epochs', 'by', NOWHERE],
    ['chaos', 'schedules', []],
    ['local', 'dynamodb-port', []],
    ['local', 's3-port', []],
  ];
  for (const [command, name, extra] of ints)
    for (const v of ['-5', '0', '1.5', 'many', '']) cases.push({ argv: [command, ...extra, `--${name}`, v], names: `--${name}` });
  for (const [command, name, extra] of [
    ['run', 'margin-ms', []],
    ['sweep', 'run-margin-ms', NOWHERE],
  ] as const) {
    for (const v of ['-1', '0.5', 'x']) cases.push({ argv: [command, ...extra, `--${name}`, v], names: `--${name}` });
  }
  for (const [command, name, extra] of [
    ['sweep', 'storm-share', NOWHERE],
    ['chaos', 'workflow-share', []],
    ['story', 'time-scale', []],
  ] as const) {
    for (const v of ['-0.5', '0x1', 'lots', '11']) cases.push({ argv: [command, ...extra, `--${name}`, v], names: `--${name}` });
  }
  for (const v of ['-5s', '0', '10x']) cases.push({ argv: ['sweep', ...NOWHERE, '--every', v], names: '--every' });
  cases.push(
    { argv: ['run', '--engine', 'lambda'], names: '--engine' },
    { argv: ['sweep', ...NOWHERE, '--run-engine', 'lambda'], names: '--run-engine' },
  );
  cases.push({ argv: ['run', '--date', '-5'], names: '--date' }, { argv: ['run', '--invoices', '5', '--invoices', '6'], names: '--invoices' });
  cases.push(
    { argv: ['chaos', '--kinds', 'pause,nap'], names: '--kinds' },
    { argv: ['bump-epochs', ...NOWHERE, '--run-id', 'a b'], names: '--run-id' },
  );
  cases.push({
    argv: ['audit', '--date', '2026-09-28', '--dynamodb-endpoint', 'localhost:8000', '--s3-endpoint', 'http://127.0.0.1:2'],
    names: '--dynamodb-endpoint',
  });

  const failures: string[] = [];
  for (const { argv, names } of cases) {
    const r = await refusedInProcess(argv);
    const ok = r.code === 2 && r.lines.length === 1 && r.lines[0].startsWith(`fencepost ${argv[0]}: `) && r.lines[0].includes(names);
    if (!ok) failures.push(`${argv.join(' ')} → exit ${r.code}:\n    ${r.lines.join('\n    ')}`);
  }
  assert.deepEqual(failures, [], `${failures.length} of ${cases.length} cases not refused in one clear line`);
});

test('a negative number that is a valid value is taken as the value (--seed -5), not refused as an option', () => {
  assert.equal(chaosOptions(parseCommand('chaos', ['--seed', '-5', '--schedules', '1'])).seed, -5);
  assert.equal(parseCommand('run', ['--worker=-A']).worker, '-A', '--opt=-value passes a value that starts with a dash');
});

test('several bad options: one line each, every one named', async () => {
  const r = await refusedInProcess(['run', '--invoices', '-5', '--chunk-size', '0', '--engine', 'x']);
  assert.equal(r.code, 2);
  assert.deepEqual(
    r.lines.map((l) => /--[\w-]+/.exec(l)?.[0]),
    ['--invoices', '--chunk-size', '--engine'],
    r.lines.join('\n'),
  );
});

test('bad input: lease settings that contradict each other are all listed', () =>
  refusedWithNothingWritten(
    ['run', '--date', '2026-09-28', '--renew-ms', '5000', '--invoices', 'many'],
    /--invoices must be an integer[\s\S]*--renew-ms \(5000\) must be at most --lease-ms \/ 3/,
  ));

test('help: fencepost --help and run --help explain the commands, options and exit codes', async () => {
  const main = await cli(['--help']);
  assert.equal(main.code, 0);
  assert.match(main.stdout, /Commands:[\s\S]*run[\s\S]*audit[\s\S]*local/);
  assert.match(main.stdout, /Exit codes/);
  const run = await cli(['run', '--help']);
  assert.equal(run.code, 0);
  for (const opt of [
    '--date',
    '--worker',
    '--invoices',
    '--chunk-size',
    '--lease-ms',
    '--renew-ms',
    '--margin-ms',
    '--dynamodb-endpoint',
    '--json',
    '--events',
  ])
    assert.ok(run.stdout.includes(opt), opt);
  const unknown = await cli(['bill']);
  assert.equal(unknown.code, 2);
  assert.match(unknown.stderr, /unknown command "bill"/);
});

test('a port in use: fencepost local says so in one line and exits non-zero', async () => {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as { port: number }).port;
  try {
    const r = await cli(['local', '--s3-port', String(port)]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, new RegExp(`port ${port} on 127.0.0.1 is already in use`));
  } finally {
    server.close();
  }
});

test('run --json prints one summary object; a second run of the same night is already-done; audit --json holds', async () => {
  const ns = await namespace();
  const args = ['run', ...storeArgs(ns), '--date', '2026-09-28', '--invoices', '1000', '--chunk-size', '250', '--json'];
  const first = await cli([...args, '--worker', 'W1']);
  assert.equal(first.code, 0, first.stderr);
  const s = JSON.parse(first.stdout);
  assert.deepEqual(
    Object.keys(s).sort(),
    [
      'chunksCommitted',
      'fencedRejections',
      'invoicesAlreadyRecorded',
      'invoicesRecorded',
      'jobId',
      'outcome',
      'seconds',
      'token',
      'transactions',
      'worker',
    ].sort(),
  );
  assert.equal(s.outcome, 'completed');
  assert.equal(s.invoicesRecorded, 1000);
  assert.equal(s.transactions, 4 * 3, '250 per chunk = 3 transactions (99 + 99 + 52), 4 chunks');
  assert.equal(s.token, 1);

  const second = await cli([...args, '--worker', 'W2']);
  assert.equal(second.code, 0);
  assert.equal(JSON.parse(second.stdout).outcome, 'already-done');
  assert.equal(JSON.parse(second.stdout).invoicesRecorded, 0);

  const a = await cli(['audit', ...storeArgs(ns), '--date', '2026-09-28', '--invoices', '1000', '--json']);
  assert.equal(a.code, 0, a.stdout);
  const report = JSON.parse(a.stdout);
  assert.equal(report.ok, true);
  assert.equal(report.invoicesFound, 1000);
  assert.equal(report.checks.length, 8, 'three billing checks and five generic ones (lib/core/audit.ts)');
  assert.deepEqual([...new Set(report.checks.map((c: { invariant: number }) => c.invariant))], [1, 2, 3, 4]);

  const wrongCount = await cli(['audit', ...storeArgs(ns), '--date', '2026-09-28', '--invoices', '1200']);
  assert.equal(wrongCount.code, 4, 'the audit notices 200 invoices missing from a DONE night');
  assert.match(wrongCount.stdout, /FAIL.*200 of 1200 invoices missing/);
});

test('the product reads no fault setting: the fault variables without the harness preload change nothing', async () => {
  const ns = await namespace();
  // Were the CLI to read them, this run would stop itself at its first batch, and every store call would be throttled.
  const env = { FENCEPOST_FAULT: 'sigstop:batch:0:0', FENCEPOST_STORE_FAULTS: 'seed=1,throttle=1,lost=1', FENCEPOST_LAMBDA_CODE: 'source' };
  const r = await cli(
    ['run', ...storeArgs(ns), '--date', '2026-09-28', '--invoices', '300', '--chunk-size', '150', '--engine', 'direct', '--events'],
    { env },
  );
  assert.equal(r.code, 0, r.stderr);
  const events = r.stdout
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { event?: string });
  assert.ok(
    events.some((e) => e.event === 'completed'),
    'the night completed',
  );
  assert.ok(!events.some((e) => e.event === 'fault'), 'no fault was injected');
  assert.doesNotMatch(r.stderr, /store-faults/, 'no store fault middleware was installed');
});

test('the fault preload refuses what it does not understand: one line, exit 2', async () => {
  const ns = await namespace();
  const night = ['run', ...storeArgs(ns), '--date', '2026-09-28', '--invoices', '300', '--chunk-size', '150', '--engine', 'direct'];
  const bad = await cli(night, { faults: { sigstop: 'nowhere:1' } });
  assert.equal(bad.code, 2, bad.stderr);
  assert.match(bad.stderr, /^fencepost fault preload: FENCEPOST_FAULT=sigstop:nowhere:1 is not understood/);
  assert.equal(bad.stderr.trim().split('\n').length, 1, bad.stderr);
  const direct = await cli(night, { faults: { sigstop: 'after-chunk:1' } });
  assert.equal(direct.code, 2, direct.stderr);
  assert.match(direct.stderr, /after-chunk stops between two workflow tasks: it needs --engine stepfunctions/);
});

// A run that loses its lease, with --events --json: every line on stdout is JSON, and the summary is the last
// one, even though the holder's work (a queued chunk task, a renewal) can report after the engine has returned.
// Both take the default lease: A loses it only by being stopped (B waits out the lease A's lock item declares), so a
// loaded machine that slows a renewal cannot make A lose it early, or B lose its own.
for (const [engine, fault] of [
  ['stepfunctions', 'after-chunk:1'],
  ['direct', 'batch:1:2'],
]) {
  test(`run --events --json (${engine} engine) that loses its lease: the JSON summary is the last line on stdout`, async () => {
    const ns = await namespace();
    const night = ['--date', '2026-09-28', '--invoices', '2000', '--chunk-size', '500', '--engine', engine];
    const a = startWorker(ns, [...night, '--worker', 'A', '--json'], { faults: { sigstop: fault } });
    let stdout = '';
    a.child.stdout!.on('data', (d) => (stdout += d));
    await a.waitFor((e) => e.fault === 'sigstop');
    const b = startWorker(ns, [...night, '--worker', 'B']);
    await b.waitFor((e) => e.event === 'fence-raised');
    a.child.kill('SIGCONT');
    assert.equal(await a.exited, 3, a.stderr.join('\n'));
    assert.equal(await b.exited, 0, b.stderr.join('\n'));
    const lines = stdout
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    assert.ok(
      lines.some((l) => l.event === 'lease-lost' || l.event === 'batch-rejected' || l.event === 'commit-rejected'),
      'A reported the loss as an event',
    );
    const last = lines.at(-1)!;
    assert.equal(last.event, undefined, `the last line is the summary, not an event: ${JSON.stringify(last)}`);
    assert.equal(last.worker, 'A');
    assert.ok(['lost-lease', 'fenced-out'].includes(String(last.outcome)), String(last.outcome));
    assert.equal(lines.filter((l) => l.event === undefined).length, 1, 'one summary');
  });
}

test('fencepost local prints copy-paste AWS CLI commands with the real table names, bucket and endpoints', async () => {
  const child = runCli(['local']);
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d) => (stdout += d));
  child.stderr!.on('data', (d) => (stderr += d));
  const exited = once(child, 'exit');
  try {
    const deadline = Date.now() + 90_000;
    while (!/aws s3 ls/.test(stderr)) {
      assert.equal(child.exitCode, null, `fencepost local exited early: ${stderr}`);
      assert.ok(Date.now() < deadline, `no endpoints printed: ${stderr}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    const up = JSON.parse(stdout.split('\n')[0]) as { dynamodbEndpoint: string; s3Endpoint: string; tables: Record<string, string>; bucket: string };
    assert.deepEqual(
      up.tables,
      { locks: 'fencepost-locks', jobs: 'fencepost-jobs' },
      "the library's two tables: an app (billing's run) adds its own",
    );
    assert.equal(up.bucket, 'fencepost-manifests');
    assert.match(up.dynamodbEndpoint, /^http:\/\/127\.0\.0\.1:\d+$/);
    for (const expected of [
      `aws dynamodb scan --table-name fencepost-jobs --endpoint-url ${up.dynamodbEndpoint}`,
      `aws dynamodb scan --table-name fencepost-locks --endpoint-url ${up.dynamodbEndpoint}`,
      `aws s3 ls s3://fencepost-manifests --recursive --endpoint-url ${up.s3Endpoint}`,
      `--dynamodb-endpoint ${up.dynamodbEndpoint} --s3-endpoint ${up.s3Endpoint}`,
    ])
      assert.ok(stderr.includes(expected), `${expected}\nin:\n${stderr}`);
  } finally {
    child.kill('SIGTERM');
    await exited;
  }
});

test('elect, leader and handover refuse bad input in one line each, with nothing written', async () => {
  await refusedWithNothingWritten(['elect', '--candidate', 'A'], /fencepost elect: --role is required/);
  await refusedWithNothingWritten(['elect', '--role', 'a/b'], /fencepost elect: --role must be 1-64 characters/);
  await refusedWithNothingWritten(
    ['elect', '--role', 'r', '--lease-ms', '900', '--renew-ms', '400'],
    /--renew-ms \(400\) must be at most --lease-ms \/ 3/,
  );
  await refusedWithNothingWritten(['elect', '--role', 'r', '--entries', '-1'], /--entries must be 0 or more/);
  await refusedWithNothingWritten(['leader'], /fencepost leader: --role is required/);
  await refusedWithNothingWritten(['handover', '--role', 'p', '--wait-margin-ms', '-5'], /wait-margin-ms must be a non-negative integer/);
  await refusedWithNothingWritten(
    ['handover', '--role', 'p', '--lease-ms', '1000', '--margin-ms', '1000', '--renew-ms', '300'],
    /--margin-ms \(1000\) must be less than --lease-ms/,
  );
  await refusedWithNothingWritten(['handover', '--role', 'p', '--writer', 'bad name'], /--writer must be 1-64 characters/);
});

test('handover, like run, lists every bad option at once (role, writer and numbers), each on its own line', async () => {
  const args = ['handover', '--role', 'bad role', '--writer', 'W', '--wait-margin-ms', '-1', '--lease-ms', '1000', '--margin-ms', '1000'];
  await refusedWithNothingWritten(args, /--role must be 1-64 characters/);
  const ep = await endpoints();
  const { prefix, bucket } = unusedNames();
  const r = await cli([...args, '--dynamodb-endpoint', ep.dynamodb, '--s3-endpoint', ep.s3, '--table-prefix', prefix, '--bucket', bucket]);
  const lines = r.stderr.split('\n').filter(Boolean);
  for (const expected of [
    /--role must be/,
    /--wait-margin-ms must be a non-negative integer, got -1/,
    /--margin-ms \(1000\) must be less than --lease-ms/,
  ])
    assert.equal(lines.filter((l) => expected.test(l)).length, 1, `${expected} once among:\n${r.stderr}`);
  assert.ok(
    lines.every((l) => l.startsWith('fencepost handover: ')),
    r.stderr,
  );
});

test('a lease lost is printed once, though every chunk task of a workflow run that resumes it reports it', () => {
  const written: string[] = [];
  const stream = { isTTY: false, write: (s: string) => void written.push(s) } as unknown as NodeJS.WriteStream;
  const show = progressBar(100, stream);
  const lost = (monoMs: number) => ({ event: 'lease-lost', worker: 'w', monoMs, key: 'job#2026-09-28', token: 4, holderNow: 'B' }) as FencepostEvent;
  // Chunk tasks run 3 at once (--chunk-concurrency): each resumes the lease in its own Lambda and finds it gone.
  for (const at of [10, 11, 12]) show(lost(at));
  show({ event: 'lease-lost', worker: 'w', monoMs: 20, key: 'job#2026-09-28', token: 6, holderNow: 'C' } as FencepostEvent);
  assert.deepEqual(
    written.filter((l) => /lease lost/.test(l)).map((l) => l.trim()),
    ['lease lost (holder now B)', 'lease lost (holder now C)'],
    'once per lease (key and token)',
  );
});

test('simulate runs a scenario from the command line, and refuses bad what-if settings in one line', async () => {
  const r = await cli(['simulate', 'handover']);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /checks: (\d+) of \1 hold/);
  const bad = await cli(['simulate', 'what-if', '--lease', '10s', '--margin', '12s']);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /^fencepost simulate: .*margin/m);
  assert.ok(bad.stderr.trim().split('\n').length <= 3, bad.stderr);
});
