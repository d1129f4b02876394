#!/usr/bin/env -S npx tsx
// The machine's Node is 20; the pinned AWS SDK supports it and only warns about releases after January 2027.
// The warning would land in every user's stderr, so it is turned off here (README: "Node version").
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

import { main } from '../cli/main';

main(process.argv.slice(2)).then((code) => {
  process.exitCode = code;
});
