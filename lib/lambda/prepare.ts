/**
 * Validate the execution's input and settle the run's date: `{ "jobDate": "YYYY-MM-DD" }` from a person, or
 * `{ "scheduledTime": "<ISO time>" }` from EventBridge Scheduler, whose date is the scheduled time's calendar
 * date in the schedule's time zone. Bad input fails here, before anything is written.
 */
import { dateIn, validateDate } from '../core/config';
import { ConfigError } from '../core/errors';
import { fromEnvironment, invoke, type RuntimeSource } from './runtime';

/** The Prepare step's input: the execution's input (a person's jobDate, or the schedule's scheduledTime) and its name. */
export interface PrepareInput {
  readonly input?: { readonly jobDate?: unknown; readonly scheduledTime?: unknown };
  readonly holder?: unknown;
}

export function jobDateOf(input: PrepareInput['input'], timeZone: string): string {
  if (input?.jobDate !== undefined) return validateDate(input.jobDate);
  const at = typeof input?.scheduledTime === 'string' ? new Date(input.scheduledTime) : undefined;
  if (!at || Number.isNaN(at.getTime())) {
    throw new ConfigError([
      `input must be { "jobDate": "YYYY-MM-DD" } or { "scheduledTime": "<ISO 8601 time>" }, got ${JSON.stringify(input ?? null)}`,
    ]);
  }
  return dateIn(at, timeZone);
}

/** The Prepare step, made from a runtime source. */
export const prepareStep = (runtime: RuntimeSource) => (event: PrepareInput) =>
  invoke('prepare', runtime, async (rt) => {
    if (typeof event?.holder !== 'string' || event.holder === '') throw new ConfigError(['holder (the execution name) is required']);
    return { jobDate: jobDateOf(event.input, rt.scheduleTimeZone), holder: event.holder };
  });

export const handler = prepareStep(fromEnvironment());
