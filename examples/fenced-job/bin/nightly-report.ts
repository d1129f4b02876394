#!/usr/bin/env node
import * as cdk from 'aws-cdk-lib/core';
import { NightlyReportStack } from '../lib/nightly-report-stack';

const app = new cdk.App();
new NightlyReportStack(app, 'NightlyReportStack', {
  // env: where to deploy, when the stack needs it (cdk init's comments say more)
});
