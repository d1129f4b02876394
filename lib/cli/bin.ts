#!/usr/bin/env node
// The `fencepost` command of the package (package.json "bin", compiled to dist/cli/bin.js): the user's commands
// (lib/cli/user.ts). The repository's own command, with its billing app and test harness, is bin/fencepost.ts.
// The pinned AWS SDK warns on Node 20 about releases after January 2027; that warning is not the user's concern here.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

import { userMain } from './user';

userMain(process.argv.slice(2)).then((code) => {
  process.exitCode = code;
});
