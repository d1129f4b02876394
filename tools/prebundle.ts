/**
 * The package's prebundled handlers (`npm run build`, after tsc): FencedJob's own handlers (every key of
 * makeHandlers, each lib/lambda/<name>.ts) bundled once, here, into ONE bundle, dist/handlers/index.js with its map,
 * that exports each handler under a JavaScript name, and dist/handlers.json naming each handler's Lambda Handler.
 * A user's `cdk synth` deploys these files instead of running esbuild eight times (docs/PERFORMANCE.md, "Consumer
 * synth"). The options are HANDLER_BUNDLING's, each passed as NodejsFunction passes it to esbuild.
 *
 *   npx tsx tools/prebundle.ts [dist]    bundle into <dist>/handlers (default: the repository's dist/)
 */
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { build, type BuildOptions } from 'esbuild';
import { HANDLER_BUNDLING, prebundled } from '../lib/constructs/handler-function';
import { makeHandlers } from '../lib/lambda/index';

const ROOT = path.resolve(__dirname, '..');

/** HANDLER_BUNDLING as esbuild options, each one as NodejsFunction passes it (aws-lambda-nodejs bundling.ts). */
function esbuildOptions(): BuildOptions {
  const { format, target, minify, keepNames, sourceMap, sourcesContent, externalModules, logLevel, ...unmapped } = HANDLER_BUNDLING;
  // A bundling option added there and not mapped here would make the package's bundle differ from the synthesized ones.
  if (Object.keys(unmapped).length > 0) throw new Error(`tools/prebundle.ts does not map HANDLER_BUNDLING's ${Object.keys(unmapped).join(', ')}`);
  return {
    bundle: true,
    platform: 'node',
    format,
    target,
    minify,
    keepNames,
    sourcemap: sourceMap,
    sourcesContent,
    external: [...externalModules],
    logLevel,
  };
}

/** The names of FencedJob's own handlers: makeHandlers' keys (each builds nothing until invoked). */
function handlerNames(): string[] {
  return Object.keys(
    makeHandlers(() => {
      throw new Error('not invoked');
    }),
  );
}

/** A handler's export in the bundle: its name in camelCase (`sweep-sight` → `sweepSight`). */
const exportOf = (name: string) => name.replace(/-(\w)/g, (_, c: string) => c.toUpperCase());

/** Bundle every handler into <dist>/handlers/index.js (replacing what was there) and write <dist>/handlers.json. */
async function prebundle(dist: string): Promise<Record<string, string>> {
  const names = handlerNames();
  const { folder, handlers } = prebundled(path.join(dist, 'constructs'));
  rmSync(folder, { recursive: true, force: true });
  const contents = names.map((name) => `export { handler as ${exportOf(name)} } from './lib/lambda/${name}';`).join('\n');
  await build({
    ...esbuildOptions(),
    stdin: { contents, resolveDir: ROOT, sourcefile: 'handlers.ts', loader: 'ts' },
    outfile: path.join(folder, 'index.js'),
  });
  const specs = Object.fromEntries(names.map((name) => [name, `index.${exportOf(name)}`]));
  mkdirSync(path.dirname(handlers), { recursive: true });
  writeFileSync(handlers, `${JSON.stringify(specs, null, 2)}\n`);
  return specs;
}

if (require.main === module) {
  const dist = path.resolve(process.argv[2] ?? path.join(ROOT, 'dist'));
  const t0 = performance.now();
  prebundle(dist).then(
    (specs) =>
      console.log(
        `prebundled ${Object.keys(specs).length} handlers into ${prebundled(path.join(dist, 'constructs')).folder} in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
      ),
    (err: unknown) => {
      console.error(err);
      process.exitCode = 1;
    },
  );
}
