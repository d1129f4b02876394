/**
 * The CDK app: `npx cdk synth` / `cdk deploy` run this (cdk.json `app`). It reads and validates the `fencepost`
 * context once (a bad value stops here, with every problem listed), builds the environment-agnostic stack
 * (no account or Region lookups: synth needs no credentials) and runs the cdk-nag AWS Solutions checks, whose
 * unacknowledged findings fail the synth (each acknowledgement in lib/ carries its reason).
 */
import { App, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { ConfigError } from '../lib/core/errors';
import { CONTEXT_KEY, readStackConfig, type StackConfig } from '../apps/billing/config';
import { FencepostStack } from '../apps/billing/stack';

const app = new App();
let config: StackConfig;
try {
  config = readStackConfig(app);
} catch (err) {
  if (!(err instanceof ConfigError)) throw err;
  console.error(`cdk.json context "${CONTEXT_KEY}": ${err.message}`);
  process.exit(1);
}
new FencepostStack(app, 'Fencepost', {
  config,
  description: 'Fencepost: a nightly billing job that runs exactly once in effect (leases + fencing tokens)',
});
Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
app.synth();
