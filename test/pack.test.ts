/**
 * The package as a user gets it: `npm run build`, `npm pack` into a temporary folder, then a fresh project that
 * installs the tarball (`npm install --prefer-offline`, from the npm cache) and imports "fencepost" by name. Its
 * program runs a fenced job (withLease + fenceOn().guard in its own transaction) against the embedded stack, and the
 * test reads the store. Deep imports past the exports map are refused, as the map says.
 */
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { sdkRequires } from './support/bundles';
import { namespace } from './support/stack';

const ROOT = path.resolve(__dirname, '..');
const work = mkdtempSync(path.join(tmpdir(), 'fencepost-pack-'));
after(() => rmSync(work, { recursive: true, force: true }));

/** Run a command to its end (async: the embedded stack may be serving from this very process). */
function run(command: string, args: string[], cwd: string, env: Record<string, string> = {}): Promise<{ code: number | null; out: string }> {
  const child = spawn(command, args, { cwd, env: { ...process.env, ...env, NODE_NO_WARNINGS: '1' }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, out })));
}

const npm = (args: string[], cwd: string) => run('npm', args, cwd, { npm_config_update_notifier: 'false' });

/** Type-check a user's file against the installed package's declarations, strictly, and compile it into the project. */
const compile = (file: string, project: string) =>
  run(
    process.execPath,
    [
      path.join(ROOT, 'node_modules/typescript/bin/tsc'),
      ...['--module', 'nodenext', '--moduleResolution', 'nodenext', '--target', 'es2022', '--strict', '--skipLibCheck'],
      ...['--types', 'node', '--typeRoots', path.join(ROOT, 'node_modules/@types'), '--outDir', project, file],
    ],
    project,
  );

/** What a user writes: TypeScript, importing the package by name, type-checked against the installed declarations. */
const CONSUMER = `
import { TransactWriteItemsCommand } from '@aws-sdk/client-dynamodb';
import { FencedOutError, fenceOn, localClients, systemClock, tableNames, withLease, type FencedPut } from 'fencepost';
import { SCENARIOS, WHAT_IF_DEFAULTS, whatIf } from 'fencepost/sim';

const clients = localClients({ dynamodb: process.env.FENCEPOST_TEST_DYNAMODB!, s3: process.env.FENCEPOST_TEST_S3! });
const tables = tableNames(process.env.PACK_PREFIX!);

async function main(): Promise<void> {
  const deps = { ddb: clients.ddb, table: tables.locks, clock: systemClock };
  const result = await withLease(deps, 'pack#job', 'consumer', { leaseMs: 3000, renewMs: 1000, marginMs: 500 }, async (lease) => {
    const fence = fenceOn({ ddb: clients.ddb, table: tables.jobs, key: { pk: 'pack#job' }, clock: systemClock });
    await lease.act(() => fence.raise(lease.token));
    const put = (token: number): FencedPut => ({ table: tables.invoices, item: { pk: { S: 'pack#item' }, token: { N: String(token) } } });
    const send = (token: number) =>
      clients.ddb.send(new TransactWriteItemsCommand({ TransactItems: [fence.guard(token), { Put: { TableName: put(token).table, Item: put(token).item } }] }));
    await lease.act(() => send(lease.token));
    const stale = await send(lease.token - 1).then(
      () => 'landed',
      (err: unknown) => (fence.fencedOut(err, lease.token - 1) instanceof FencedOutError ? 'fenced-out' : String(err)),
    );
    return { token: lease.token, stale };
  });
  // The simulator, from its own entry: the main story's checks, and the default what-if's refused zombie write.
  const story = await SCENARIOS.find((x) => x.name === 'main-story')!.run();
  const sim = { storyChecksHold: story.checks.every((c) => c.ok), refusedWrites: whatIf(WHAT_IF_DEFAULTS).answers.refusedWrites };
  console.log(JSON.stringify({ ...result, sim }));
}

main().finally(() => clients.destroy());
`;

test('npm pack → npm install in a fresh project → import "fencepost" and run a fenced job on the embedded stack', { timeout: 240_000 }, async () => {
  // 1. The package as published: the build script, then the tarball (scripts skipped: the build just ran).
  const build = await npm(['run', 'build'], ROOT);
  assert.equal(build.code, 0, `npm run build failed:\n${build.out}`);
  const packed = await npm(['pack', '--ignore-scripts', '--json', '--pack-destination', work], ROOT);
  assert.equal(packed.code, 0, packed.out);
  const [{ filename, files }] = JSON.parse(packed.out.slice(packed.out.indexOf('['))) as { filename: string; files: { path: string }[] }[];
  // The package is the library, the constructs and their handlers: the CLI and the emulators stay in the repository.
  const expected = ['package.json', 'README.md'];
  const outside = files.map((f) => f.path).filter((p) => !p.startsWith('dist/') && !expected.includes(p));
  assert.deepEqual(outside, [], 'only dist/, README.md and package.json are packed');
  for (const entry of ['dist/core/index.js', 'dist/core/index.d.ts'])
    assert.ok(
      files.some((f) => f.path === entry),
      `${entry} is packed`,
    );
  const sources = files.map((f) => f.path).filter((p) => p.startsWith('dist/') && p.endsWith('.ts') && !p.endsWith('.d.ts'));
  assert.deepEqual(sources, [], 'dist/ holds JavaScript and declarations only');

  // 2. A fresh project installs the tarball, dependencies from the npm cache.
  const project = path.join(work, 'consumer');
  await run('mkdir', ['-p', project], work);
  writeFileSync(path.join(project, 'package.json'), JSON.stringify({ name: 'consumer', version: '1.0.0', private: true }));
  const install = await npm(['install', '--prefer-offline', '--no-audit', '--no-fund', path.join(work, filename)], project);
  assert.equal(install.code, 0, `npm install failed:\n${install.out}`);
  assert.ok(readdirSync(path.join(project, 'node_modules', 'fencepost', 'dist', 'core')).includes('index.js'));

  // 3. The user's program: type-checked against the installed declarations, compiled, run with node.
  writeFileSync(path.join(project, 'main.ts'), CONSUMER);
  const tsc = await compile('main.ts', project);
  assert.equal(tsc.code, 0, `the consumer does not type-check against the package's declarations:\n${tsc.out}`);
  const ns = await namespace();
  const job = await run(process.execPath, ['main.js'], project, {
    FENCEPOST_TEST_DYNAMODB: ns.endpoints.dynamodb,
    FENCEPOST_TEST_S3: ns.endpoints.s3,
    PACK_PREFIX: ns.prefix,
  });
  assert.equal(job.code, 0, job.out);
  assert.deepEqual(JSON.parse(job.out.trim().split('\n').at(-1)!), {
    token: 1,
    stale: 'fenced-out',
    sim: { storyChecksHold: true, refusedWrites: 1 },
  });
  const item = await ns.clients.ddb.send(new GetCommand({ TableName: ns.tables.invoices, Key: { pk: 'pack#item' }, ConsistentRead: true }));
  assert.deepEqual(item.Item, { pk: 'pack#item', token: 1 }, "the holder's guarded put landed; the stale one did not");
  const lock = await ns.clients.ddb.send(new GetCommand({ TableName: ns.tables.locks, Key: { pk: 'pack#job' }, ConsistentRead: true }));
  assert.equal(lock.Item?.holder, undefined, 'withLease released the lease');

  // 4. The exports map is the only way in.
  const deep = await run(process.execPath, ['-e', "require('fencepost/dist/core/fence')"], project);
  assert.notEqual(deep.code, 0);
  assert.match(deep.out, /ERR_PACKAGE_PATH_NOT_EXPORTED/);
  const manifest = await run(process.execPath, ['-e', "console.log(require('fencepost/package.json').name)"], project);
  assert.equal(manifest.out.trim(), 'fencepost', '"./package.json" is exported');
  const constructs = await run(process.execPath, ['-p', "require.resolve('fencepost/constructs')"], project);
  assert.equal(constructs.out.trim(), path.join(project, 'node_modules/fencepost/dist/lib/index.js'), '"./constructs" maps to dist/lib/index');
});

test(
  'the README\'s FencedJob example, copied verbatim into the fresh project, synthesizes from "fencepost/constructs" with every function bundled',
  { timeout: 300_000 },
  async () => {
    const project = path.join(work, 'consumer');
    assert.ok(existsSync(path.join(project, 'node_modules', 'fencepost')), 'the first test installed the package');
    // NodejsFunction bundles with the project's own esbuild (no Docker): a CDK app that builds Lambdas has it.
    const esbuild = (JSON.parse(readFileSync(path.join(ROOT, 'node_modules/esbuild/package.json'), 'utf8')) as { version: string }).version;
    const install = await npm(['install', '--prefer-offline', '--no-audit', '--no-fund', `esbuild@${esbuild}`], project);
    assert.equal(install.code, 0, `npm install esbuild failed:\n${install.out}`);
    for (const f of ['stack.ts', 'chunk.ts']) copyFileSync(path.join(ROOT, 'examples/fenced-job', f), path.join(project, f));
    const tsc = await compile('stack.ts', project);
    assert.equal(tsc.code, 0, `the example does not type-check against the installed package:\n${tsc.out}`);
    // Run the compiled app as `cdk synth` runs one (CDK_OUTDIR says where the cloud assembly goes).
    const outdir = path.join(project, 'cdk.out');
    const synth = await run(process.execPath, ['stack.js'], project, { CDK_OUTDIR: outdir });
    assert.equal(synth.code, 0, `synth failed:\n${synth.out}`);
    const template = JSON.parse(readFileSync(path.join(outdir, 'NightlyReport.template.json'), 'utf8')) as {
      Resources: Record<string, { Type: string; Properties: Record<string, unknown> }>;
    };
    const ofType = (t: string) => Object.values(template.Resources).filter((r) => r.Type === t);
    assert.equal(ofType('AWS::StepFunctions::StateMachine').length, 2, 'the job and the sweeper');
    assert.equal(ofType('AWS::DynamoDB::Table').length, 3, 'lock, job (fence) and the report table');
    for (const t of ofType('AWS::DynamoDB::Table')) assert.equal(t.Properties.TimeToLiveSpecification, undefined, 'no TTL on any table');
    assert.ok(
      ofType('AWS::S3::BucketPolicy').some((p) => JSON.stringify(p.Properties).includes('s3:if-none-match')),
      'the manifest bucket refuses unconditional manifest writes',
    );
    // Every function is bundled from the installed package's JavaScript (dist/lambda) or the user's chunk.ts.
    const functions = ofType('AWS::Lambda::Function');
    assert.equal(functions.length, 9);
    const assets = readdirSync(outdir).filter((d) => d.startsWith('asset.'));
    assert.ok(assets.length >= 9, `a bundle per function, got ${assets.length}`);
    for (const a of assets) assert.ok(existsSync(path.join(outdir, a, 'index.js')), `${a} holds a bundle`);
    // The user's chunk function too carries the SDK it was tested with, not the runtime's copy.
    for (const a of assets) assert.deepEqual(sdkRequires(path.join(outdir, a, 'index.js')), [], `${a} requires the runtime's AWS SDK`);
  },
);
