/**
 * EventBridge Scheduler's cron expressions read as a calendar: the local times a schedule starts at, the days it
 * starts on, and the daylight-saving gaps of its time zone, computed with Intl from the zone's own rules (not a table).
 *
 * Scheduler reads a cron in the schedule's time zone and follows its daylight saving time: "When the time shifts
 * forward in Spring, your schedule invocation gets skipped if the cron expression falls on a non-existent date and
 * time. When the time shifts back in the Fall, your schedule runs only once and doesn't repeat its invocation"
 * (https://repost.aws/knowledge-center/eventbridge-scheduler-adjust-dst; "Daylight savings time on EventBridge
 * Scheduler", https://docs.aws.amazon.com/scheduler/latest/UserGuide/schedule-types.html). A start in a gap is a
 * date that never runs; a start in an overlap runs once, so it needs nothing here.
 */

/** A cron schedule's starts: the local times of day, and the days. */
export interface CronCalendar {
  /** Every local start time of a day it starts on, in minutes after midnight, ascending. */
  readonly startMinutes: readonly number[];
  /**
   * The local weekdays it starts on (0 Sunday … 6 Saturday) when its days are a set of weekdays, every month of every
   * year; undefined when they are days of the month, months, years, or L, W, #, which no set of weekdays says.
   */
  readonly weekdays: ReadonlySet<number> | undefined;
  /** Whether it starts on this local date (month 1..12); a field this reader cannot expand (L, W, #) counts as yes. */
  startsOn(year: number, month: number, day: number): boolean;
}

const MONTH_NAMES = ['JAN', 'FEB', 'MAR', 'APR', 'MAY', 'JUN', 'JUL', 'AUG', 'SEP', 'OCT', 'NOV', 'DEC'];
const DAY_NAMES = ['SUN', 'MON', 'TUE', 'WED', 'THU', 'FRI', 'SAT']; // Scheduler's day-of-week: SUN = 1

/** One cron field as its set of values, or undefined when it is not a plain set (`?`, L, W, #, a reversed range). */
function field(text: string, min: number, max: number, names?: readonly string[]): Set<number> | undefined {
  const value = (v: string) => (/^\d+$/.test(v) ? Number(v) : names ? names.indexOf(v.toUpperCase()) + min : NaN);
  const out = new Set<number>();
  for (const part of text.split(',')) {
    const m = /^(\*|[A-Za-z0-9]+(?:-[A-Za-z0-9]+)?)(?:\/([1-9]\d*))?$/.exec(part);
    if (!m) return undefined;
    const [from, to] = m[1] === '*' ? [min, max] : m[1].split('-').map(value);
    const lo = from;
    const hi = to ?? (m[2] ? max : from);
    if (!(Number.isInteger(lo) && Number.isInteger(hi) && min <= lo && lo <= hi && hi <= max)) return undefined;
    for (let v = lo; v <= hi; v += m[2] ? Number(m[2]) : 1) out.add(v);
  }
  return out;
}

/** A cron(minutes hours day-of-month month day-of-week year) expression as a calendar; undefined for rate(...) or one this reader cannot expand. */
export function cronCalendar(expression: string): CronCalendar | undefined {
  const m = /^cron\((.+)\)$/.exec(expression.trim());
  const fields = m?.[1].trim().split(/\s+/);
  if (fields?.length !== 6) return undefined;
  const [minuteF, hourF, domF, monthF, dowF, yearF] = fields;
  const minutes = field(minuteF, 0, 59);
  const hours = field(hourF, 0, 23);
  if (!minutes || !hours) return undefined;
  const startMinutes = [...hours].flatMap((h) => [...minutes].map((mi) => h * 60 + mi)).sort((a, b) => a - b);
  const any = (f: string) => f === '*' || f === '?';
  const months = any(monthF) ? undefined : field(monthF, 1, 12, MONTH_NAMES);
  const years = any(yearF) ? undefined : field(yearF, 1970, 2199);
  const doms = any(domF) ? undefined : field(domF, 1, 31);
  const dows = any(dowF) ? undefined : field(dowF, 1, 7, DAY_NAMES);
  const weekdays =
    any(domF) && any(monthF) && any(yearF) && (any(dowF) || dows) ? new Set(dows ? [...dows].map((d) => d - 1) : [0, 1, 2, 3, 4, 5, 6]) : undefined;
  return {
    startMinutes,
    weekdays,
    startsOn(year, month, day) {
      if (!any(yearF) && years && !years.has(year)) return false;
      if (!any(monthF) && months && !months.has(month)) return false;
      if (!any(domF) && doms && !doms.has(day)) return false;
      if (!any(dowF) && dows && !dows.has(new Date(Date.UTC(year, month - 1, day)).getUTCDay() + 1)) return false;
      return true;
    },
  };
}

const offsetFormats = new Map<string, Intl.DateTimeFormat>();

/** The zone's offset from UTC at an instant, in minutes east of Greenwich. */
export function zoneOffsetMinutes(timeZone: string, at: number): number {
  let format = offsetFormats.get(timeZone);
  if (!format) {
    format = new Intl.DateTimeFormat('en-US', { timeZone, timeZoneName: 'longOffset' });
    offsetFormats.set(timeZone, format);
  }
  const name = format.formatToParts(at).find((p) => p.type === 'timeZoneName')?.value ?? 'GMT';
  const m = /^GMT([+-])(\d{2}):(\d{2})$/.exec(name);
  return m ? (m[1] === '-' ? -1 : 1) * (Number(m[2]) * 60 + Number(m[3])) : 0; // "GMT": UTC itself
}

/** A daylight-saving gap: on a local date, the local times from `fromMinute` up to `toMinute` do not exist. */
export interface DstGap {
  /** The local date, YYYY-MM-DD. */
  readonly date: string;
  readonly year: number;
  readonly month: number;
  readonly day: number;
  /** First missing local minute of the day. */
  readonly fromMinute: number;
  /** The first local minute after the gap (may be 1440 or more when the gap ends the day). */
  readonly toMinute: number;
}

const MINUTE = 60_000;
const DAY_MS = 86_400_000;

/**
 * The zone's gaps from the start of `fromYear` for `years` years: each instant the offset moves forward, found by
 * reading the offset once a day and bisecting the day where it changed to the minute.
 */
function dstGaps(timeZone: string, fromYear: number, years: number): DstGap[] {
  const gaps: DstGap[] = [];
  const end = Date.UTC(fromYear + years, 0, 1);
  let before = zoneOffsetMinutes(timeZone, Date.UTC(fromYear, 0, 1));
  for (let t = Date.UTC(fromYear, 0, 1) + DAY_MS; t <= end; t += DAY_MS) {
    const after = zoneOffsetMinutes(timeZone, t);
    if (after === before) continue;
    let lo = t - DAY_MS;
    let hi = t;
    while (hi - lo > MINUTE) {
      const mid = lo + Math.floor((hi - lo) / 2 / MINUTE) * MINUTE;
      if (zoneOffsetMinutes(timeZone, mid) === before) lo = mid;
      else hi = mid;
    }
    if (after > before) {
      const local = new Date(hi + before * MINUTE); // the wall clock just before it jumps, read as UTC
      const fromMinute = local.getUTCHours() * 60 + local.getUTCMinutes();
      const [year, month, day] = [local.getUTCFullYear(), local.getUTCMonth() + 1, local.getUTCDate()];
      const date = `${year}-${String(month).padStart(2, '0')}-${String(day).padStart(2, '0')}`;
      gaps.push({ date, year, month, day, fromMinute, toMinute: fromMinute + after - before });
    }
    before = after;
  }
  return gaps;
}

/** `hh:mm` of a minute of the day. */
export const clockTime = (minute: number) => `${String(Math.floor(minute / 60) % 24).padStart(2, '0')}:${String(minute % 60).padStart(2, '0')}`;

/** How many years ahead the gap check looks. */
const DST_CHECK_YEARS = 10;

/**
 * The first date, from `fromYear` for DST_CHECK_YEARS years, on which every start of a cron schedule falls in a
 * daylight-saving gap of its zone (so Scheduler starts nothing that day), or undefined.
 */
export function dateInDstGap(expression: string, timeZone: string, fromYear: number): { gap: DstGap; starts: readonly number[] } | undefined {
  const cron = cronCalendar(expression);
  if (!cron) return undefined;
  for (const gap of dstGaps(timeZone, fromYear, DST_CHECK_YEARS)) {
    if (!cron.startsOn(gap.year, gap.month, gap.day)) continue;
    // A gap that runs past midnight is counted on its first day only: a zone's jump never spans a whole day.
    if (cron.startMinutes.every((s) => s >= gap.fromMinute && s < gap.toMinute)) return { gap, starts: cron.startMinutes };
  }
  return undefined;
}
