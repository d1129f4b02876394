#!/usr/bin/env -S npx tsx
import { main } from '../lib/cli/main';

main(process.argv.slice(2)).then((code) => {
  process.exitCode = code;
});
