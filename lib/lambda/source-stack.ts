/**
 * Stack traces in the TypeScript sources, paid for only when an error is logged. Each bundle ships its source map
 * beside it (`index.js.map`); `--enable-source-maps` would read it at every cold start and decode it at the first
 * stack formatted, inside the gap a lease covers (docs/PERFORMANCE.md, "Cold start"). Enabling maps at run time
 * (`process.setSourceMapsEnabled`) does not help: Node maps only the files loaded after it. So a logged error's
 * frames are mapped here, through the map of the file each frame names, read on the first error that needs it.
 */
import { readFileSync } from 'node:fs';
import { SourceMap, type SourceMapPayload } from 'node:module';
import path from 'node:path';

/** A frame's generated position: `/var/task/index.js:69:27003`, in parentheses or not. */
const FRAME = /((?:\/|[A-Za-z]:\\)[^\s():]+\.c?js):(\d+):(\d+)/;

/** Each bundle's map, once read; undefined when the file has none (the sources, or a bundle built without one). */
const maps = new Map<string, SourceMap | undefined>();

function mapOf(file: string): SourceMap | undefined {
  if (!maps.has(file)) {
    let map: SourceMap | undefined;
    try {
      map = new SourceMap(JSON.parse(readFileSync(`${file}.map`, 'utf8')) as SourceMapPayload);
    } catch {
      map = undefined;
    }
    maps.set(file, map);
  }
  return maps.get(file);
}

/** The stack with every frame that has a map pointing into its source instead (1-based lines and columns, as Node's). */
export function sourceStack(stack: string): string {
  return stack
    .split('\n')
    .map((line) => {
      const m = FRAME.exec(line);
      const map = m && mapOf(m[1]);
      if (!m || !map) return line;
      const entry = map.findEntry(Number(m[2]) - 1, Number(m[3]) - 1);
      if (!('originalSource' in entry)) return line;
      const source = path.resolve(path.dirname(m[1]), entry.originalSource);
      return line.replace(m[0], `${source}:${entry.originalLine + 1}:${entry.originalColumn + 1}`);
    })
    .join('\n');
}

/** The error, its stack mapped to the sources (in place: the runtime's own report of the error shows it too). */
export function withSourceStack(err: unknown): unknown {
  if (err instanceof Error && typeof err.stack === 'string') {
    try {
      err.stack = sourceStack(err.stack);
    } catch {
      // A stack that cannot be mapped is logged as it is.
    }
  }
  return err;
}
