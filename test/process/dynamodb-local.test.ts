/**
 * Real DynamoDB Local (Java) started from Node: round trip, and no Java process left behind however the parent ends.
 * Run: npx tsx --test test/process/dynamodb-local.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { CreateTableCommand, DynamoDBClient, GetItemCommand, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { InfrastructureError } from '../../lib/core/errors';
import { stateDir, findDynamoDbLocalJar, reapOrphans, startDynamoDbLocal } from '../../lib/local/dynamodb-local';

const ROOT = path.resolve(__dirname, '..', '..');
const CHILD = path.join(__dirname, '..', 'support', 'start-ddb-child.ts');
const T = { timeout: 120_000 };

const isDynamoDbLocal = (pid: number) => {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('DynamoDBLocal.jar');
  } catch {
    return false;
  }
};
const pidFileOf = (javaPid: number) => path.join(stateDir(), `${javaPid}.json`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function waitFor(what: string, cond: () => boolean, ms: number): Promise<number> {
  const t0 = Date.now();
  while (!cond()) {
    if (Date.now() - t0 > ms) assert.fail(`timed out after ${ms} ms waiting for: ${what}`);
    await sleep(50);
  }
  return Date.now() - t0;
}

/** DynamoDB Local JVMs whose parent is this process (to prove a failed start left nothing behind). */
function ourJavaChildren(): number[] {
  return fs
    .readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .map(Number)
    .filter((pid) => {
      try {
        const stat = fs
          .readFileSync(`/proc/${pid}/stat`, 'utf8')
          .replace(/^.*\) /s, '')
          .split(' ');
        return Number(stat[1]) === process.pid && isDynamoDbLocal(pid);
      } catch {
        return false;
      }
    });
}

interface ChildInfo {
  javaPid?: number;
  port?: number;
  endpoint?: string;
  error?: string;
  message?: string;
}

/** Runs test/support/start-ddb-child.ts and resolves with its first JSON line. */
function startChild(
  mode: string,
  env: NodeJS.ProcessEnv = process.env,
): Promise<{ child: ChildProcess; info: ChildInfo; exit: Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }> }> {
  const child = spawn(process.execPath, ['--import', 'tsx', CHILD, mode], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal, stderr })),
  );
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d) => {
      out += d;
      const line = out.split('\n').find((l) => l.startsWith('{'));
      if (line && out.includes('\n')) resolve({ child, info: JSON.parse(line) as ChildInfo, exit });
    });
    void exit.then((e) => reject(new Error(`child exited (${e.code ?? e.signal}) before reporting: ${e.stderr}`)));
  });
}

test('finds the bundled jar without hard-coding its dated folder', () => {
  const { dir, jar } = findDynamoDbLocalJar();
  assert.match(path.basename(dir), /^dynamodb_local_\d{4}-\d{2}-\d{2}$/);
  assert.ok(fs.existsSync(jar) && fs.existsSync(path.join(dir, 'DynamoDBLocal_lib')));
});

test('start, CreateTable/PutItem/GetItem round trip, stop() leaves no process', T, async () => {
  const t0 = performance.now();
  const ddb = await startDynamoDbLocal();
  const startMs = performance.now() - t0;
  const rssMb = Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${ddb.pid}/status`, 'utf8'))![1]) / 1024;
  console.log(`DynamoDB Local ready in ${startMs.toFixed(0)} ms at ${ddb.endpoint}, JVM pid ${ddb.pid}, RSS ${rssMb.toFixed(0)} MB`);
  assert.match(ddb.endpoint, /^http:\/\/127\.0\.0\.1:\d+$/);
  const record = JSON.parse(fs.readFileSync(pidFileOf(ddb.pid), 'utf8')) as { parentPid: number; javaPid: number; watchdogPid: number; jar: string };
  assert.equal(record.parentPid, process.pid);
  assert.equal(record.javaPid, ddb.pid);
  assert.match(record.jar, /DynamoDBLocal\.jar$/);

  const client = new DynamoDBClient({ endpoint: ddb.endpoint, region: 'us-east-1', credentials: { accessKeyId: 'test', secretAccessKey: 'test' } });
  try {
    await client.send(
      new CreateTableCommand({
        TableName: 'locks',
        AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' }],
        KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
        BillingMode: 'PAY_PER_REQUEST',
      }),
    );
    await client.send(new PutItemCommand({ TableName: 'locks', Item: { pk: { S: 'job#1' }, epoch: { N: '7' } } }));
    const got = await client.send(new GetItemCommand({ TableName: 'locks', Key: { pk: { S: 'job#1' } }, ConsistentRead: true }));
    assert.deepEqual(got.Item, { pk: { S: 'job#1' }, epoch: { N: '7' } });
  } finally {
    client.destroy();
  }

  const s0 = performance.now();
  await ddb.stop();
  console.log(`stop() took ${(performance.now() - s0).toFixed(0)} ms`);
  await ddb.stop(); // idempotent
  assert.equal(fs.existsSync(`/proc/${ddb.pid}`), false, 'JVM still present after stop()');
  assert.equal(fs.existsSync(`/proc/${record.watchdogPid}`), false, 'watchdog still present after stop()');
  assert.equal(fs.existsSync(pidFileOf(ddb.pid)), false, 'pid file left after stop()');
});

test('parent killed with SIGKILL: the watchdog kills the JVM within a few seconds', T, async () => {
  const { child, info, exit } = await startChild('wait');
  const javaPid = info.javaPid!;
  assert.ok(isDynamoDbLocal(javaPid));
  child.kill('SIGKILL');
  assert.equal((await exit).signal, 'SIGKILL');
  const ms = await waitFor('JVM gone after parent SIGKILL', () => !isDynamoDbLocal(javaPid), 5000);
  console.log(`watchdog removed the JVM ${ms} ms after the parent's SIGKILL`);
  await waitFor('watchdog removed the pid file', () => !fs.existsSync(pidFileOf(javaPid)), 2000);
});

test('parent and watchdog both SIGKILLed: reapOrphans() kills the JVM via its pid file', T, async (t) => {
  // The orphan's pid file goes to a folder of this test's own: the reaper of any other DynamoDB Local starting
  // meanwhile (another test file's, the packed-tarball test's) looks in the shared one, and leaves this orphan to us.
  const own = fs.mkdtempSync(path.join(os.tmpdir(), 'fencepost-reap-'));
  const shared = process.env.FENCEPOST_DYNAMODB_LOCAL_STATE;
  process.env.FENCEPOST_DYNAMODB_LOCAL_STATE = own;
  t.after(() => {
    if (shared === undefined) delete process.env.FENCEPOST_DYNAMODB_LOCAL_STATE;
    else process.env.FENCEPOST_DYNAMODB_LOCAL_STATE = shared;
    fs.rmSync(own, { recursive: true, force: true });
  });
  const { child, info, exit } = await startChild('wait', { ...process.env, FENCEPOST_DYNAMODB_LOCAL_STATE: own });
  const javaPid = info.javaPid!;
  const { watchdogPid } = JSON.parse(fs.readFileSync(pidFileOf(javaPid), 'utf8')) as { watchdogPid: number };
  process.kill(watchdogPid, 'SIGKILL');
  child.kill('SIGKILL');
  await exit;
  await sleep(1000);
  assert.ok(isDynamoDbLocal(javaPid), 'with no watchdog and no parent, the JVM is an orphan');
  assert.ok((await reapOrphans()) >= 1);
  assert.equal(isDynamoDbLocal(javaPid), false);
  assert.equal(fs.existsSync(pidFileOf(javaPid)), false);
});

test('reapOrphans() removes stale pid files and never kills a process that is not DynamoDB Local', async () => {
  const dead = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' });
  const deadPid = Number(dead.stdout);
  const bystander = spawn('sleep', ['30'], { stdio: 'ignore' });
  try {
    fs.mkdirSync(stateDir(), { recursive: true });
    const write = (name: string, javaPid: number) =>
      fs.writeFileSync(
        path.join(stateDir(), name),
        JSON.stringify({ parentPid: deadPid, javaPid, jar: 'DynamoDBLocal.jar', port: 1, startedAt: '' }),
      );
    write('test-stale.json', deadPid); // java long gone
    write('test-bystander.json', bystander.pid!); // pid now used by something else
    fs.writeFileSync(path.join(stateDir(), 'test-garbage.json'), '{not json');
    await reapOrphans(); // (its count may include other runs' real orphans, so it is not asserted here)
    for (const f of ['test-stale.json', 'test-bystander.json', 'test-garbage.json']) assert.equal(fs.existsSync(path.join(stateDir(), f)), false, f);
    assert.equal(bystander.exitCode, null);
    assert.ok(fs.existsSync(`/proc/${bystander.pid}`), 'bystander must survive');
  } finally {
    bystander.kill('SIGKILL');
  }
});

test('parent gets SIGTERM: its handler kills the JVM (watchdog disabled) and the parent still dies of SIGTERM', T, async () => {
  const { child, info, exit } = await startChild('wait');
  const javaPid = info.javaPid!;
  const { watchdogPid } = JSON.parse(fs.readFileSync(pidFileOf(javaPid), 'utf8')) as { watchdogPid: number };
  process.kill(watchdogPid, 'SIGKILL'); // prove the in-process handler alone is enough
  child.kill('SIGTERM');
  const e = await exit;
  assert.equal(e.signal, 'SIGTERM', `exit code ${e.code}: shell would report 143`);
  await waitFor('JVM gone after parent SIGTERM', () => !isDynamoDbLocal(javaPid), 5000);
  await reapOrphans(); // the pid file is now stale: it goes
  assert.equal(fs.existsSync(pidFileOf(javaPid)), false);
});

test('parent gets SIGINT: JVM gone, parent dies of SIGINT (130)', T, async () => {
  const { child, info, exit } = await startChild('wait');
  child.kill('SIGINT');
  assert.equal((await exit).signal, 'SIGINT');
  await waitFor('JVM gone after parent SIGINT', () => !isDynamoDbLocal(info.javaPid!), 5000);
});

test('uncaught exception in the parent: JVM gone, exception still reported, exit code 1', T, async () => {
  const { info, exit } = await startChild('throw');
  const e = await exit;
  assert.equal(e.code, 1);
  assert.match(e.stderr, /boom from start-ddb-child/);
  await waitFor('JVM gone after uncaught exception', () => !isDynamoDbLocal(info.javaPid!), 5000);
});

test('parent forgets stop(): it still exits on its own and the JVM goes with it', T, async () => {
  const { info, exit } = await startChild('forget');
  assert.equal((await exit).code, 0);
  await waitFor('JVM gone after parent exit', () => !isDynamoDbLocal(info.javaPid!), 5000);
});

test('a port already in use: InfrastructureError naming the port, nothing spawned', async () => {
  const server = net.createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as net.AddressInfo;
  try {
    await assert.rejects(startDynamoDbLocal({ port }), (e: unknown) => {
      assert.ok(e instanceof InfrastructureError);
      assert.equal(e.message, `DynamoDB Local: port ${port} on 127.0.0.1 is already in use`);
      return true;
    });
    assert.deepEqual(ourJavaChildren(), []);
  } finally {
    server.close();
  }
});

test("a port taken after the pre-check: the JVM's own bind failure becomes the same error", T, async () => {
  const probe = net.createServer();
  await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
  const { port } = probe.address() as net.AddressInfo;
  await new Promise<void>((r) => probe.close(() => r()));
  const thief = net.createServer();
  const lines: string[] = [];
  try {
    // The JVM prints its configuration before it binds: take the port the moment that first line arrives.
    const log = (line: string) => lines.push(line) === 1 && thief.listen(port, '127.0.0.1');
    await assert.rejects(startDynamoDbLocal({ port, log }), (e: unknown) => {
      assert.ok(e instanceof InfrastructureError);
      assert.equal(e.message, `DynamoDB Local: port ${port} on 127.0.0.1 is already in use`);
      return true;
    });
    assert.ok(
      lines.some((l) => /Failed to bind|Address already in use/.test(l)),
      'the JVM reported the bind failure',
    );
    assert.deepEqual(ourJavaChildren(), []);
  } finally {
    thief.close();
  }
});

test('no Java: InfrastructureError that says Java is needed', async () => {
  // In a child whose PATH has no java at all.
  const emptyDir = fs.mkdtempSync(path.join(os.tmpdir(), 'no-java-'));
  try {
    const { info, exit } = await startChild('wait', { ...process.env, PATH: emptyDir, FENCEPOST_JAVA: '' });
    assert.equal(info.error, 'InfrastructureError');
    assert.match(info.message!, /needs a Java runtime \(java not found on PATH\); install one/);
    assert.equal((await exit).code, 2);
  } finally {
    fs.rmSync(emptyDir, { recursive: true, force: true });
  }
  // In-process, through FENCEPOST_JAVA.
  const saved = process.env.FENCEPOST_JAVA;
  try {
    for (const bad of ['/nonexistent/java', '/bin/false']) {
      process.env.FENCEPOST_JAVA = bad;
      await assert.rejects(startDynamoDbLocal(), (e: unknown) => e instanceof InfrastructureError && /Java runtime/.test(e.message));
    }
  } finally {
    if (saved === undefined) delete process.env.FENCEPOST_JAVA;
    else process.env.FENCEPOST_JAVA = saved;
  }
});

test('no answer within startTimeoutMs: InfrastructureError with the JVM output, and the JVM is killed', T, async () => {
  await assert.rejects(startDynamoDbLocal({ startTimeoutMs: 1 }), (e: unknown) => {
    assert.ok(e instanceof InfrastructureError);
    assert.match(e.message, /^DynamoDB Local did not answer on http:\/\/127\.0\.0\.1:\d+ within 1 ms; last output: /);
    return true;
  });
  assert.deepEqual(ourJavaChildren(), []);
});
