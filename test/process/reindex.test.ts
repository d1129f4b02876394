/**
 * The reindex job (apps/reindex): a second job, built only on Fencepost's public API, that fences single-item
 * updates with `guard` in its own transactions. Its imports stay on the public entries; with two real worker
 * processes, a holder whose update was delayed in flight and who was stopped past its lease is refused by the fence
 * after a second holder took over and completed; bad input is refused with nothing written; its stack (one FencedJob
 * and two tables) synthesizes with the grants the chunk function needs; and one night runs locally through the
 * synthesized state machine with the bundles.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync, readdirSync } from 'node:fs';
import http from 'node:http';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { exitedAfterOutput } from '../../verify/chaos/worker-process';
import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import type { CfnTable } from 'aws-cdk-lib/aws-dynamodb';
import { CreateBucketCommand } from '@aws-sdk/client-s3';
import { ScanCommand } from '@aws-sdk/lib-dynamodb';
import { Attr } from '../../lib/core/schema';
import { localClients, systemClock, type Clients } from '../../lib/core/index';
import { Env } from '../../lib/constructs/index';
import { reindexApp } from '../../apps/reindex/app';
import { chunkCount } from '../../apps/reindex/job';
import { provisionReindex, seedProducts } from '../../apps/reindex/provision';
import { chunkFenceKey, productKey, runKeys, type ReindexTables } from '../../apps/reindex/schema';
import { ReindexStack } from '../../apps/reindex/stack';
import { runWorkflowLocally } from '../../lib/local/workflow';
import { callLogSink } from '../../verify/proofs/call-log';
import { endpoints } from '../support/stack';
import { within } from '../support/within';

type Json = Record<string, unknown>;

const ROOT = path.resolve(__dirname, '..', '..');
const WORKER = path.join(ROOT, 'apps/reindex/worker.ts');
const DATE = '2026-09-28';
const LEASE_MS = 3_000;
const ITEMS = 120;
const CHUNK_SIZE = 40;
const night = ['--date', DATE, '--items', String(ITEMS), '--chunk-size', String(CHUNK_SIZE)];
const lease = ['--lease-ms', String(LEASE_MS), '--renew-ms', '1000', '--margin-ms', '1000'];

/** Fresh tables for one test, seeded with ITEMS products. */
async function reindexStores(t: TestContext): Promise<{ clients: Clients; prefix: string; tables: ReindexTables; dynamodb: string }> {
  const ep = await endpoints();
  const clients = localClients(ep);
  t.after(() => clients.destroy());
  const prefix = `r${randomBytes(4).toString('hex')}-`;
  const tables = await provisionReindex(clients.raw, systemClock, prefix);
  await seedProducts(clients.ddb, tables, ITEMS);
  return { clients, prefix, tables, dynamodb: ep.dynamodb };
}

async function scan(clients: Clients, table: string): Promise<Json[]> {
  const items: Json[] = [];
  let start: Json | undefined;
  do {
    const out = await clients.ddb.send(new ScanCommand({ TableName: table, ExclusiveStartKey: start, ConsistentRead: true }));
    items.push(...((out.Items ?? []) as Json[]));
    start = out.LastEvaluatedKey;
  } while (start);
  return items;
}

/** A worker process: its progress lines (stderr, JSON), its summary (stdout), its exit. Leads its own process group. */
function startWorker(t: TestContext, args: string[], env: Record<string, string> = {}) {
  const child = spawn(process.execPath, ['--import', 'tsx', WORKER, ...args], {
    cwd: ROOT,
    env: { ...process.env, ...env, NODE_NO_WARNINGS: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  const progress: Json[] = [];
  const stderr: string[] = [];
  const stdout: string[] = [];
  const waiters: { pred: (e: Json) => boolean; resolve: (e: Json) => void }[] = [];
  createInterface({ input: child.stdout! }).on('line', (line) => stdout.push(line));
  createInterface({ input: child.stderr! }).on('line', (line) => {
    stderr.push(line);
    let e: Json;
    try {
      e = JSON.parse(line) as Json;
    } catch {
      return;
    }
    progress.push(e);
    for (const w of waiters.filter((w) => w.pred(e))) {
      waiters.splice(waiters.indexOf(w), 1);
      w.resolve(e);
    }
  });
  const exited = exitedAfterOutput(child);
  const signal = (s: NodeJS.Signals) => process.kill(-child.pid!, s); // the whole group: a real pause of the holder
  t.after(() => {
    if (child.exitCode === null && child.signalCode === null) signal('SIGKILL');
  });
  return {
    child,
    progress,
    stderr,
    stdout,
    exited,
    signal,
    /** The first progress line matching `pred`, seen or to come. */
    waitFor(pred: (e: Json) => boolean): Promise<Json> {
      const seen = progress.find(pred);
      if (seen) return Promise.resolve(seen);
      return new Promise((resolve, reject) => {
        waiters.push({ pred, resolve });
        void exited.then(() => setTimeout(() => reject(new Error(`exited before the line; stderr:\n${stderr.join('\n')}`)), 50));
      });
    },
    /** The summary line, once the process has exited. */
    async summary(): Promise<Json> {
      await exited;
      assert.equal(stdout.length, 1, `one summary line on stdout, got: ${stdout.join(' | ')}; stderr:\n${stderr.join('\n')}`);
      return JSON.parse(stdout[0]) as Json;
    },
  };
}

/**
 * A DynamoDB endpoint in front of the store that, once armed, holds the next TransactWriteItems it receives until
 * released, then forwards it and hands back the store's answer. It stands for a write delayed in the network after
 * its sender passed its stop-time check (reference Part 4): a fault from outside the worker, which only sees a slow
 * answer. Everything else passes through at once, renewals included.
 */
async function startHoldingRelay(t: TestContext, target: string) {
  const upstream = new URL(target);
  let armed = false;
  let hold: ((item: string) => void) | undefined;
  const held = new Promise<string>((resolve) => (hold = resolve));
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  let answer!: (a: { status: number; body: string }) => void;
  const answered = new Promise<{ status: number; body: string }>((resolve) => (answer = resolve));
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      void (async () => {
        const body = Buffer.concat(chunks);
        const holding = armed && String(req.headers['x-amz-target']).endsWith('.TransactWriteItems');
        if (holding) {
          armed = false;
          const request = JSON.parse(body.toString()) as { TransactItems: { Update?: { Key: { pk: { S: string } } } }[] };
          hold!(request.TransactItems[1].Update!.Key.pk.S);
          await released;
        }
        const up = http.request({ host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers }, (r) => {
          const parts: Buffer[] = [];
          r.on('data', (c: Buffer) => parts.push(c));
          r.on('end', () => {
            const reply = Buffer.concat(parts);
            if (holding) answer({ status: r.statusCode ?? 0, body: reply.toString() });
            res.writeHead(r.statusCode ?? 502, r.headers);
            res.end(reply);
          });
        });
        up.on('error', () => res.destroy());
        up.end(body);
      })();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(() => {
    release();
    server.closeAllConnections();
    server.close();
  });
  return {
    endpoint: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    /** Hold the next TransactWriteItems. */
    arm: () => (armed = true),
    /** The product key of the held update, once one is held. */
    held,
    /** Forward the held update; resolves with the store's answer. */
    release: () => {
      release();
      return answered;
    },
  };
}

function processState(pid: number): string {
  return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1][0]; // R, S, T (stopped), …
}

// lib/core/internal.ts too: the job engine (runJob, its deps) and the schema pieces the app provisions with are not in the
// core entry's 40 names (issue 20, item 3); and lib/lambda/internal.ts, the chunk function's runtime (its clients, clock,
// events), which the Lambda entry does not hand out; and lib/constructs/internal.ts, schemaTable for its own tables, which the
// constructs entry does not hand out. The app reaches them through the repository's internal barrels.
test('apps/reindex is built on the entries only: lib/core/index, lib/constructs/index, the Lambda entry a chunk function uses, the internal barrels', () => {
  const dir = path.join(ROOT, 'apps/reindex');
  const files = readdirSync(dir, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts'));
  const allowed = new Set([
    'lib/core/index.ts',
    'lib/constructs/index.ts',
    'lib/lambda/entry.ts',
    'lib/core/internal.ts',
    'lib/lambda/internal.ts',
    'lib/constructs/internal.ts',
  ]);
  const deep: string[] = [];
  for (const f of files) {
    const code = readFileSync(path.join(dir, f), 'utf8');
    for (const [, spec] of code.matchAll(/\bfrom\s+'(\.[^']+)'/g)) {
      const target = path.relative(ROOT, path.resolve(dir, path.dirname(f), spec)) + '.ts';
      if (!target.startsWith('apps/reindex/') && !allowed.has(target)) deep.push(`apps/reindex/${f} imports ${spec}`);
    }
  }
  assert.ok(files.length >= 7, `the checker sees the job's files: ${files.join(', ')}`);
  assert.deepEqual(deep, [], 'deep imports');
});

test("Part 4 with real processes: A's update is held in flight and A is stopped mid-chunk; B takes over and completes; A's update is refused by the fence", async (t) => {
  const s = await reindexStores(t);
  const relay = await startHoldingRelay(t, s.dynamodb);
  const a = startWorker(t, [...night, ...lease, '--holder', 'A', '--table-prefix', s.prefix, '--dynamodb-endpoint', relay.endpoint]);

  // 1. A works: once it reports its first update of chunk 1, its next update is held in flight (it passed its
  //    check and sent it), and A is stopped for real, its heartbeat with it.
  await a.waitFor((e) => e.event === 'updated' && e.chunk === 1);
  relay.arm();
  const heldItem = await within(relay.held, 30_000, "the relay held none of A's updates");
  a.signal('SIGSTOP');
  await new Promise((r) => setTimeout(r, 100));
  assert.equal(processState(a.child.pid!), 'T', 'A is really stopped');
  assert.equal(Math.floor(Number(heldItem.slice('prod#'.length)) / CHUNK_SIZE), 1, 'the held update is mid-chunk 1');
  const aToken = a.progress.find((e) => e.event === 'claim')!.token;
  assert.equal(aToken, 1);

  // 2. B sees A's lease, waits a full lease on its own clock, claims a higher token, raises every fence first and
  //    completes: chunk 0 was recorded done by A and is skipped, chunks 1 and 2 are B's.
  const b = startWorker(t, [...night, ...lease, '--holder', 'B', '--table-prefix', s.prefix], { FENCEPOST_TEST_DYNAMODB: s.dynamodb });
  const sighted = await b.waitFor((e) => e.event === 'sighted');
  assert.equal(sighted.holder, 'A', "B sees A's lease");
  assert.equal(sighted.waitMs, LEASE_MS, 'and must watch it unchanged for a full lease before claiming');
  assert.equal(await b.exited, 0, b.stderr.join('\n'));
  const bSummary = await b.summary();
  assert.deepEqual(bSummary, {
    holder: 'B',
    date: DATE,
    outcome: 'completed',
    token: 2,
    updated: 2 * CHUNK_SIZE,
    missing: 0,
    chunksRun: 2,
    chunksSkipped: 1,
  });
  const raisedAt = b.progress.findIndex((e) => e.event === 'fence-raised');
  assert.deepEqual(b.progress[raisedAt].chunksDone, [0], 'the raise returned A’s done mark on chunk 0');
  assert.ok(
    b.progress.slice(0, raisedAt).every((e) => e.event !== 'updated'),
    'B raised every fence before its first update',
  );
  const bUpdated = new Set(b.progress.filter((e) => e.event === 'updated').map((e) => String(e.item)));
  assert.equal(bUpdated.size, 2 * CHUNK_SIZE);

  // 3. The held update reaches the store only now, carrying A's token: the chunk fence (raised to 2) refuses it,
  //    and the Update beside the guard does not land.
  const refused = await relay.release();
  assert.equal(refused.status, 400);
  const reasons = (JSON.parse(refused.body) as { CancellationReasons: { Code: string }[] }).CancellationReasons.map((r) => r.Code);
  assert.deepEqual(reasons, ['ConditionalCheckFailed', 'None'], 'the guard at position 0 failed; nothing else was tried');

  // 4. A continues: it reads the refusal as FencedOutError, stops, and exits with the fenced-out code.
  a.signal('SIGCONT');
  assert.equal(await a.exited, 3, a.stderr.join('\n'));
  const aSummary = await a.summary();
  assert.equal(aSummary.outcome, 'fenced-out');
  assert.equal(aSummary.token, 1);
  assert.match(String(aSummary.reason), /fenced out at chunk-fence: our token 1, fence 2/);
  const aUpdated = new Set(a.progress.filter((e) => e.event === 'updated').map((e) => String(e.item)));
  assert.ok(!aUpdated.has(heldItem), 'A never saw its held update land');

  // 5. The index holds every product exactly once: B's token on everything B wrote, A's only on chunk 0, which A
  //    wrote before B's raise and recorded done; the held product is B's.
  const entries = await scan(s.clients, s.tables.index);
  assert.deepEqual(
    entries.map((e) => String(e.pk)).sort(),
    Array.from({ length: ITEMS }, (_, i) => productKey(i)),
  );
  for (const e of entries) {
    const item = String(e.pk);
    assert.equal(e.night, DATE);
    if (bUpdated.has(item)) assert.equal(e.indexed_by, 2, `${item} is B's`);
    else {
      assert.equal(e.indexed_by, 1, `${item} is A's`);
      assert.ok(aUpdated.has(item) && Number(item.slice('prod#'.length)) < CHUNK_SIZE, `${item}: A's token only on chunk 0, reported by A`);
    }
  }
  assert.equal(entries.find((e) => e.pk === heldItem)!.indexed_by, 2, "the held product carries B's token, not A's late one");

  // 6. The fences: the job row DONE at 2; every chunk fence at 2 and done; chunk 0 done by A, the others by B.
  const rows = new Map((await scan(s.clients, s.tables.jobs)).map((r) => [String(r.pk), r]));
  assert.equal(rows.get(runKeys.job(DATE))![Attr.state], 'DONE');
  assert.equal(rows.get(runKeys.job(DATE))![Attr.fence], 2);
  const fences = [0, 1, 2].map((c) => rows.get(chunkFenceKey(DATE, c))!);
  assert.deepEqual(
    fences.map((f) => [f[Attr.fence], f[Attr.doneBy]]),
    [
      [2, 1],
      [2, 2],
      [2, 2],
    ],
  );
});

test('bad input: exit 2, one line naming every problem, nothing written', async (t) => {
  const s = await reindexStores(t);
  const w = startWorker(t, [
    '--date',
    '2026-02-30',
    '--holder',
    'A',
    '--chunk-size',
    '0',
    '--table-prefix',
    s.prefix,
    '--dynamodb-endpoint',
    s.dynamodb,
  ]);
  assert.equal(await w.exited, 2);
  assert.equal(w.stderr.length, 1, w.stderr.join('\n'));
  assert.match(w.stderr[0], /^reindex: --date must be a calendar date YYYY-MM-DD, got "2026-02-30"; --chunk-size must be an integer from 1/);
  assert.deepEqual(w.stdout, []);
  for (const table of [s.tables.locks, s.tables.jobs, s.tables.index]) assert.deepEqual(await scan(s.clients, table), [], `${table} is empty`);
});

test('ReindexStack synthesizes one FencedJob and the job’s tables; the chunk function can read products, update the index and check its fence', () => {
  const app = new App({ context: { 'aws:cdk:bundling-stacks': [] }, builtinCloudFormationValidation: false });
  const stack = new ReindexStack(app, 'Reindex', { items: 200, chunkSize: 50 });
  const template = Template.fromStack(stack);
  const idOf = (c: { node: { defaultChild?: unknown } }) => stack.getLogicalId(c.node.defaultChild as CfnTable);
  const arn = (c: { node: { defaultChild?: unknown } }) => ({ 'Fn::GetAtt': [idOf(c), 'Arn'] });

  // The FencedJob's pieces: the job's and the sweeper's state machines, the lock and job tables beside the job's two.
  template.resourceCountIs('AWS::StepFunctions::StateMachine', 2);
  template.resourceCountIs('AWS::DynamoDB::Table', 4);
  const locks = template.toJSON().Resources[idOf(stack.job.lockTable)] as { Properties: Json };
  assert.equal(locks.Properties.TimeToLiveSpecification, undefined, 'no TTL on the lock table: a deleted lock item restarts its epoch');

  // The chunk function: FencedJob's environment, and the grants by need.
  const fn = template.toJSON().Resources[idOf(stack.chunkFunction)] as { Properties: { Environment: { Variables: Json } } };
  assert.equal(fn.Properties.Environment.Variables[Env.jobName], 'reindex');
  assert.equal(fn.Properties.Environment.Variables[Env.chunks], String(chunkCount({ items: 200, chunkSize: 50 })));
  const role = (fn.Properties as unknown as { Role: { 'Fn::GetAtt': string[] } }).Role['Fn::GetAtt'][0];
  const statements = Object.values(template.findResources('AWS::IAM::Policy'))
    .filter((p) => JSON.stringify(p.Properties.Roles).includes(role))
    .flatMap((p) => p.Properties.PolicyDocument.Statement as { Action: string | string[]; Resource: unknown }[]);
  const can = (action: string, resource: Json) =>
    statements.some((st) => ([] as string[]).concat(st.Action).includes(action) && JSON.stringify(st.Resource) === JSON.stringify(resource));
  assert.ok(can('dynamodb:UpdateItem', arn(stack.index)), 'UpdateItem on the index table');
  assert.ok(can('dynamodb:GetItem', arn(stack.source)), 'GetItem on the source table');
  assert.ok(can('dynamodb:ConditionCheckItem', arn(stack.job.jobTable)), "ConditionCheckItem on the job table (its chunk's fence)");
  assert.ok(!can('dynamodb:UpdateItem', arn(stack.source)), 'nothing more: the source table is only read');
  // The workflow invokes the chunk function in its chunk step.
  const definition = JSON.stringify(template.findResources('AWS::StepFunctions::StateMachine'));
  assert.ok(
    definition.includes('ReindexChunk') && definition.includes(idOf(stack.chunkFunction)),
    'the ReindexChunk step invokes the chunk function',
  );
});

test('one night through the synthesized state machine, locally, with the bundles: every product indexed with the execution’s token', async (t) => {
  const s = await reindexStores(t);
  const ep = await endpoints();
  const bucket = `b${randomBytes(4).toString('hex')}`;
  await s.clients.s3.send(new CreateBucketCommand({ Bucket: bucket }));
  const r = await runWorkflowLocally({
    app: reindexApp,
    clients: s.clients,
    endpoints: ep,
    onCall: callLogSink(),
    tables: s.tables,
    bucket,
    name: 'reindex-night',
    input: { jobDate: DATE },
    settings: { items: ITEMS, chunkSize: CHUNK_SIZE, leaseMs: LEASE_MS, renewMs: 1000, marginMs: 1000 },
  });
  assert.equal(r.endState, 'Completed', `${r.error}: ${r.cause}`);
  assert.equal(r.history.filter((h) => h.type === 'StateEntered' && h.state === 'ReindexChunk').length, ITEMS / CHUNK_SIZE);
  const entries = await scan(s.clients, s.tables.index);
  assert.deepEqual(
    entries.map((e) => String(e.pk)).sort(),
    Array.from({ length: ITEMS }, (_, i) => productKey(i)),
  );
  assert.ok(
    entries.every((e) => e.indexed_by === 1 && e.night === DATE),
    'every entry written by the execution, token 1, tonight',
  );
  const rows = new Map((await scan(s.clients, s.tables.jobs)).map((row) => [String(row.pk), row]));
  assert.equal(rows.get(runKeys.job(DATE))![Attr.state], 'DONE');
  assert.ok(
    [0, 1, 2].every((c) => rows.get(chunkFenceKey(DATE, c))![Attr.doneBy] === 1),
    'every chunk recorded done on its fence item',
  );
});
