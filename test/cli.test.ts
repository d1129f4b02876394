/** The `fencepost` command as a user runs it: exit codes, the JSON summary, help, and bad input refused with nothing written. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { ListTablesCommand } from '@aws-sdk/client-dynamodb';
import { HeadBucketCommand } from '@aws-sdk/client-s3';
import { localClients } from '../lib/core/stores';
import { endpoints, namespace, unusedNames } from './support/stack';
import { runCli, storeArgs } from './support/worker';

async function cli(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = runCli(args, env);
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d) => (stdout += d));
  child.stderr!.on('data', (d) => (stderr += d));
  const [code] = await once(child, 'exit');
  return { code: code as number | null, stdout, stderr };
}

/** Runs a command with a fresh prefix and bucket, then proves it created neither. */
async function refusedWithNothingWritten(args: string[], message: RegExp): Promise<void> {
  const ep = await endpoints();
  const { prefix, bucket } = unusedNames();
  const r = await cli([...args, '--dynamodb-endpoint', ep.dynamodb, '--s3-endpoint', ep.s3, '--table-prefix', prefix, '--bucket', bucket]);
  assert.equal(r.code, 2, `exit 2 for bad input; stderr: ${r.stderr}`);
  assert.match(r.stderr, message);
  assert.ok(r.stderr.split('\n').filter(Boolean).length <= 6, `a short, clear message, not a stack trace:\n${r.stderr}`);
  const clients = localClients(ep);
  try {
    const tables = await clients.raw.send(new ListTablesCommand({}));
    assert.deepEqual((tables.TableNames ?? []).filter((t) => t.startsWith(prefix)), [], 'no table was created');
    await assert.rejects(clients.s3.send(new HeadBucketCommand({ Bucket: bucket })), 'no bucket was created');
  } finally {
    clients.destroy();
  }
}

test('bad input: a malformed date → clear message, exit 2, nothing written', () =>
  refusedWithNothingWritten(['run', '--date', '2026-02-30', '--invoices', '10'], /date 2026-02-30 is not a calendar date/));

test('bad input: --date in the wrong format', () =>
  refusedWithNothingWritten(['run', '--date', '28/09/2026'], /--date must be YYYY-MM-DD/));

test('bad input: --chunk-size 0', () =>
  refusedWithNothingWritten(['run', '--date', '2026-09-28', '--chunk-size', '0'], /--chunk-size must be a positive integer/));

test('bad input: more than 99 puts per transaction', () =>
  refusedWithNothingWritten(['run', '--date', '2026-09-28', '--puts-per-transaction', '100'], /at most 99/));

test('bad input: an unknown option', () =>
  refusedWithNothingWritten(['run', '--date', '2026-09-28', '--chunks', '3'], /Unknown option '--chunks'/));

test('bad input: lease settings that contradict each other are all listed', () =>
  refusedWithNothingWritten(['run', '--date', '2026-09-28', '--renew-ms', '5000', '--invoices', 'many'], /--invoices must be an integer[\s\S]*renew-ms \(5000\) must be at most lease-ms \/ 3/));

test('help: fencepost --help and run --help explain the commands, options and exit codes', async () => {
  const main = await cli(['--help']);
  assert.equal(main.code, 0);
  assert.match(main.stdout, /Commands:[\s\S]*run[\s\S]*audit[\s\S]*local/);
  assert.match(main.stdout, /Exit codes/);
  const run = await cli(['run', '--help']);
  assert.equal(run.code, 0);
  for (const opt of ['--date', '--worker', '--invoices', '--chunk-size', '--lease-ms', '--renew-ms', '--margin-ms', '--dynamodb-endpoint', '--json', '--events']) assert.ok(run.stdout.includes(opt), opt);
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
  assert.deepEqual(Object.keys(s).sort(), ['chunksCommitted', 'fencedRejections', 'invoicesAlreadyRecorded', 'invoicesRecorded', 'jobId', 'outcome', 'seconds', 'token', 'transactions', 'worker'].sort());
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
  assert.equal(report.checks.length, 6);

  const wrongCount = await cli(['audit', ...storeArgs(ns), '--date', '2026-09-28', '--invoices', '1200']);
  assert.equal(wrongCount.code, 4, 'the audit notices 200 invoices missing from a DONE night');
  assert.match(wrongCount.stdout, /FAIL.*200 of 1200 invoices missing/);
});
