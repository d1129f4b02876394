/**
 * What a scenario is and what it returns: its event table (rows), its timeline (marks), and its checks: each a
 * number the reference states, next to the number the models produced. A scenario never prints a constant as an
 * outcome: it sets the schedule (who pauses when, when a worker polls), the models compute the rest.
 */
import { type SimRow, type TimelineMark } from './engine';

/** One check of a scenario: a number (or fact) the reference states, next to the one the models produced. */
export interface Check {
  /** What is checked, in the reference's words. */
  readonly what: string;
  /** The reference's value. */
  readonly expected: number | string | boolean;
  /** The models' value (undefined: the event never happened). */
  readonly actual: number | string | boolean | undefined;
  /** Whether they agree. */
  readonly ok: boolean;
}

/** One input of a scenario: a number the scenario assumes (the reference's, or an assumption), not an outcome. */
export interface ScenarioInput {
  /** What it is, in the reference's words. */
  readonly name: string;
  /** Its value: ms for a duration or a time, else a count. */
  readonly value: number;
  /** Whether `value` is a duration or time in ms (printed in seconds) or a count. */
  readonly unit: 'ms' | 'count';
  /** Where it comes from: the reference's figure, or an assumption and why. */
  readonly note: string;
}

/** What a scenario's run returns: its event table, its timeline and its checks. */
export interface ScenarioResult {
  /** The scenario's name (`fencepost simulate <name>`). */
  readonly name: string;
  /** One line: what it shows. */
  readonly title: string;
  /** The reference Part(s) and the claim the scenario shows. */
  readonly claim: string;
  /** The event table, in true-time order. */
  readonly rows: readonly SimRow[];
  /** The timeline's bars and points. */
  readonly marks: readonly TimelineMark[];
  /** The reference's numbers against the models'. */
  readonly checks: readonly Check[];
  /** The inputs the scenario assumed, when it states them (`fencepost simulate` prints them before the checks). */
  readonly inputs?: readonly ScenarioInput[];
}

/** A named, runnable scenario: it sets the schedule the reference assumes; the models compute the rest. */
export interface Scenario {
  /** The name `fencepost simulate` takes. */
  readonly name: string;
  /** One line: what it shows. */
  readonly title: string;
  /** The reference Part(s) and the claim the scenario shows. */
  readonly claim: string;
  /** Run it (deterministic: the same result every time). A scenario on the real code is asynchronous. */
  run(): ScenarioResult | Promise<ScenarioResult>;
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
