/**
 * The README's code snippets are files: each ```ts block follows a marker `<!-- snippet: examples/….ts -->` naming the
 * file it quotes, byte for byte (test/unit/readme.test.ts checks it; test/package/pack.test.ts runs the files from the installed
 * package). Run this file (`npx tsx test/support/readme-snippets.ts`) to copy every marked file into its block again
 * after the file changed.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

export const ROOT = path.resolve(__dirname, '../..');

/** A marker, then its block (prettier puts a blank line between): the file's path, the gap, and the block's text. */
const SNIPPET = /<!-- snippet: (\S+) -->(\n+)```ts\n([\s\S]*?)```/g;

/** Every ```ts block of a markdown text, marked or not. */
export const tsBlocks = (markdown: string): string[] => [...markdown.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]);

/** The marked snippets of a markdown text: the file each names, and the text its block holds. */
export const snippets = (markdown: string): { file: string; block: string }[] =>
  [...markdown.matchAll(SNIPPET)].map((m) => ({ file: m[1], block: m[3] }));

/** The README with every marked block replaced by its file as it is now. */
const withFiles = (markdown: string): string =>
  markdown.replace(
    SNIPPET,
    (_, file: string, gap: string) => `<!-- snippet: ${file} -->${gap}\`\`\`ts\n${readFileSync(path.join(ROOT, file), 'utf8')}\`\`\``,
  );

if (require.main === module) {
  const readme = path.join(ROOT, 'README.md');
  writeFileSync(readme, withFiles(readFileSync(readme, 'utf8')));
}
