/**
 * What a scenario is and what it returns: its event table (rows), its timeline (marks), and its checks: each a
 * number the reference states, next to the number the models produced. A scenario never prints a constant as an
 * outcome: it sets the schedule (who pauses when, when a worker polls), the models compute the rest.
 */
import { type SimRow, type TimelineMark } from './engine';

export interface Check {
  readonly what: string;
  readonly expected: number | string | boolean;
  readonly actual: number | string | boolean | undefined;
  readonly ok: boolean;
}

export interface ScenarioResult {
  readonly name: string;
  readonly title: string;
  /** The reference Part(s) and the claim the scenario shows. */
  readonly claim: string;
  readonly rows: readonly SimRow[];
  readonly marks: readonly TimelineMark[];
  readonly checks: readonly Check[];
}

export interface Scenario {
  readonly name: string;
  readonly title: string;
  readonly claim: string;
  run(): ScenarioResult;
}

/** Collects checks: `eq` compares a model's output with the reference's number (seconds to the hundredth). */
export class Checks {
  readonly list: Check[] = [];
  eq(what: string, expected: number | string | boolean, actual: number | string | boolean | undefined): this {
    const ok = typeof expected === 'number' && typeof actual === 'number' ? Math.abs(expected - actual) < 1e-6 : expected === actual;
    this.list.push({ what, expected, actual, ok });
    return this;
  }
  /** A check that a condition the reference states holds (e.g. a gap of at least 5 s). */
  that(what: string, actual: number | undefined, holds: (v: number) => boolean, expected: string): this {
    this.list.push({ what, expected, actual, ok: actual !== undefined && holds(actual) });
    return this;
  }
}

/** ms → seconds, rounded to the hundredth (the reference's precision). */
export const s = (ms: number | undefined): number | undefined => (ms === undefined || !Number.isFinite(ms) ? undefined : Math.round(ms / 10) / 100);
