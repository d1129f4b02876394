/** Every named scenario, in the reference's order: `fencepost simulate <name>` runs one, `--list` lists them. */
import type { Scenario } from '../scenario';
import { claimRulesScenario, wallStepScenario } from './clocks';
import { ttlEpochsScenario } from './epochs';
import { electionScenario } from './election';
import { handoverScenario } from './handover';
import { redisFailoverScenario, redlockScenario, restoreLockServiceScenario } from './failures';
import { restoreScenario } from './restore';
import { nightScenario } from './night';
import { mainStoryScenario } from './story';
import { threeWaysScenario } from './three-ways';

/**
 * The reference's scenarios, in its order: each sets its schedule, runs the real code (what Fencepost implements) or
 * the models (what it does not), and checks the reference's numbers.
 */
export const SCENARIOS: readonly Scenario[] = [
  nightScenario,
  mainStoryScenario,
  wallStepScenario,
  claimRulesScenario,
  ttlEpochsScenario,
  electionScenario,
  handoverScenario,
  redisFailoverScenario,
  redlockScenario,
  restoreScenario,
  restoreLockServiceScenario,
  threeWaysScenario,
];
