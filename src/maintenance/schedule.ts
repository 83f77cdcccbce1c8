import vm from "node:vm";
import rrule from "rrule";

/**
 * Recurring maintenance windows: an RRULE (RFC 5545) evaluated in an IANA time zone.
 *
 * rrule's own `tzid` support converts through the process's local zone, so its answers depend on
 * the TZ of the machine. Instead the rule runs in "floating" time: every Date it sees or returns
 * carries a wall-clock time of the window's zone in its UTC fields, and this module converts wall
 * clock to instants with Intl (RFC 5545, 3.3.5: a time that a DST change skips is taken with the
 * offset before the change, e.g. 02:30 on the spring-forward day is 03:30 daylight time; a time
 * that happens twice is its first occurrence).
 */
const { RRule } = rrule;
type RRuleT = InstanceType<typeof RRule>;

export interface Recurrence {
  /** One RRULE line, without the `RRULE:` prefix, UNTIL in UTC (`…Z`) or as wall clock. */
  rrule: string;
  /** The wall-clock start the rule counts from, `YYYY-MM-DDTHH:MM:SS`, in `timezone`. */
  dtstart: string;
  timezone: string;
  durationMinutes: number;
}

export interface Span {
  start: Date;
  end: Date;
}

const MINUTE = 60_000;
const DAY = 86_400_000;
const WEEK = 7 * DAY;

// ---- time zones ------------------------------------------------------------------------------

const formatters = new Map<string, Intl.DateTimeFormat>();

/** A formatter for the zone, or null when the zone is unknown (`Intl` refuses it). */
function formatter(timezone: string): Intl.DateTimeFormat | null {
  let f = formatters.get(timezone);
  if (f) return f;
  try {
    f = new Intl.DateTimeFormat("en-US", {
      timeZone: timezone,
      hourCycle: "h23",
      year: "numeric",
      month: "2-digit",
      day: "2-digit",
      hour: "2-digit",
      minute: "2-digit",
      second: "2-digit",
    });
  } catch {
    return null;
  }
  formatters.set(timezone, f);
  return f;
}

/**
 * True for an IANA zone name Intl knows (`Europe/Paris`, `UTC`); offsets like `+02:00` and
 * abbreviations like `EST` are refused, since they don't follow a place's DST rules.
 */
export function isTimeZone(timezone: string): boolean {
  if (!/^[A-Za-z][A-Za-z0-9_+-]*(\/[A-Za-z0-9_+-]+)*$/.test(timezone) || timezone.length > 64) return false;
  if (timezone !== "UTC" && !timezone.includes("/")) return false;
  return formatter(timezone) !== null;
}

/** The wall clock of `instant` in the zone, as a floating Date (its UTC fields are the wall clock). */
export function toWall(instant: number, timezone: string): number {
  const f = formatter(timezone);
  if (!f) throw new RangeError(`unknown time zone ${timezone}`);
  const p: Record<string, number> = {};
  for (const part of f.formatToParts(new Date(instant)))
    if (part.type !== "literal") p[part.type] = Number(part.value);
  const n = (k: string) => p[k] ?? 0;
  const wall = Date.UTC(n("year"), n("month") - 1, n("day"), n("hour"), n("minute"), n("second"));
  return wall + (instant - Math.floor(instant / 1000) * 1000);
}

/** The zone's offset from UTC at `instant`, in milliseconds. */
const offsetAt = (instant: number, timezone: string) => toWall(instant, timezone) - instant;

/** The instant a wall-clock time (floating) of the zone names; see the module comment for DST. */
export function fromWall(wall: number, timezone: string): number {
  const before = offsetAt(wall - DAY, timezone);
  const after = offsetAt(wall + DAY, timezone);
  const valid = [...new Set([before, after])]
    .map((o) => wall - o)
    .filter((t) => toWall(t, timezone) === wall)
    .sort((a, b) => a - b);
  // A skipped time (no offset maps back to it) is read with the offset before the change.
  return valid[0] ?? wall - before;
}

/** `YYYY-MM-DDTHH:MM:SS` of a floating Date. */
export const wallText = (wall: number) => new Date(wall).toISOString().slice(0, 19);
const parseWall = (text: string) => Date.parse(`${text}Z`);

// ---- rules -----------------------------------------------------------------------------------

/** Thrown by parseRule with a message for the `body.rrule` field. */
export class RuleError extends Error {
  override name = "RuleError";
}

const ALLOWED_FREQ = new Set(["YEARLY", "MONTHLY", "WEEKLY", "DAILY", "HOURLY"]);
const KNOWN_PARTS = new Set([
  "FREQ",
  "INTERVAL",
  "COUNT",
  "UNTIL",
  "WKST",
  "BYSETPOS",
  "BYMONTH",
  "BYMONTHDAY",
  "BYYEARDAY",
  "BYWEEKNO",
  "BYDAY",
  "BYHOUR",
  "BYMINUTE",
  "BYSECOND",
]);

/** Value ranges of the numeric parts: low, high, and whether a value may be negative (never 0 then). */
const RANGES: Record<string, [number, number, boolean]> = {
  INTERVAL: [1, 1000, false],
  COUNT: [1, 100_000, false],
  BYSECOND: [0, 59, false],
  BYMINUTE: [0, 59, false],
  BYHOUR: [0, 23, false],
  BYMONTH: [1, 12, false],
  BYMONTHDAY: [1, 31, true],
  BYYEARDAY: [1, 366, true],
  BYWEEKNO: [1, 53, true],
  BYSETPOS: [1, 366, true],
};

/**
 * Checks the text of an RRULE and returns it normalised (upper case, without an `RRULE:`
 * prefix). Throws RuleError naming what is wrong. The rule's own validity is rrule's; this adds
 * what a maintenance schedule needs: FREQ is required and at least HOURLY, no DTSTART (the
 * schedule's start is `starts_at`), COUNT and UNTIL not both.
 */
export function parseRule(text: string): string {
  let t = text.trim();
  if (/[\r\n]/.test(t))
    throw new RuleError("must be one RRULE line (no DTSTART or EXDATE lines); start it with starts_at");
  t = t.replace(/^RRULE:/i, "").toUpperCase();
  if (t === "") throw new RuleError("must not be empty");
  const names = new Set<string>();
  for (const part of t.split(";")) {
    const m = /^([A-Z]+)=([^;=]+)$/.exec(part);
    if (!m) throw new RuleError(`"${part}" is not a NAME=VALUE part of an RRULE`);
    const name = m[1] ?? "";
    if (name === "DTSTART" || name === "TZID")
      throw new RuleError(`${name} is not taken in the rule: give starts_at and timezone instead`);
    if (!KNOWN_PARTS.has(name)) throw new RuleError(`${name} is not an RRULE part`);
    if (names.has(name)) throw new RuleError(`${name} is given twice`);
    names.add(name);
  }
  for (const part of t.split(";")) {
    const [name, value] = part.split("=") as [string, string];
    const range = RANGES[name];
    if (range) {
      const [lo, hi, signed] = range;
      for (const v of value.split(",")) {
        const n = /^[+-]?\d{1,4}$/.test(v) ? Number(v) : NaN;
        const ok =
          Number.isInteger(n) && (signed ? Math.abs(n) >= lo && Math.abs(n) <= hi : n >= lo && n <= hi);
        if (!ok)
          throw new RuleError(
            `${name}=${value}: each value must be ${signed ? `±${lo}..${hi}` : `${lo}..${hi}`}`,
          );
      }
    }
    if (name === "BYDAY")
      for (const v of value.split(","))
        if (!/^([+-]?([1-9]|[1-4]\d|5[0-3]))?(MO|TU|WE|TH|FR|SA|SU)$/.test(v))
          throw new RuleError(
            `BYDAY=${value}: each value must be a day (MO…SU), optionally numbered (1MO, -1FR)`,
          );
    if (name === "WKST" && !/^(MO|TU|WE|TH|FR|SA|SU)$/.test(value))
      throw new RuleError(`WKST=${value} must be a day, MO…SU`);
  }
  const freq = /(?:^|;)FREQ=([A-Z]+)/.exec(t)?.[1];
  if (!freq) throw new RuleError("needs FREQ, e.g. FREQ=WEEKLY;BYDAY=SU;BYHOUR=2;BYMINUTE=0");
  if (!ALLOWED_FREQ.has(freq))
    throw new RuleError(`FREQ=${freq} is not taken: use YEARLY, MONTHLY, WEEKLY, DAILY or HOURLY`);
  if (names.has("COUNT") && names.has("UNTIL")) throw new RuleError("COUNT and UNTIL must not both be given");
  const until = /(?:^|;)UNTIL=([^;]+)/.exec(t)?.[1];
  if (until !== undefined && !/^\d{8}(T\d{6}Z?)?$/.test(until))
    throw new RuleError("UNTIL must be a date (20250131) or a date-time (20250131T020000Z)");
  try {
    const opts = RRule.parseString(t);
    opts.dtstart = new Date(Date.UTC(2000, 0, 1));
    new RRule(opts).toString();
  } catch (err) {
    throw new RuleError(`is not a valid RRULE: ${err instanceof Error ? err.message : String(err)}`);
  }
  return t;
}

/** The rule in floating time: dtstart the wall clock, UNTIL given in UTC moved to wall clock. */
function floatingRule(rec: Recurrence): RRuleT {
  const opts = RRule.parseString(rec.rrule);
  opts.dtstart = new Date(parseWall(rec.dtstart));
  opts.tzid = null;
  const untilText = /(?:^|;)UNTIL=([^;]+)/.exec(rec.rrule)?.[1];
  if (opts.until && untilText?.endsWith("Z"))
    opts.until = new Date(toWall(opts.until.getTime(), rec.timezone));
  // rrule keeps a result cache per rule; this module keeps its own per week.
  return new RRule(opts, true);
}

// ---- occurrences, cached ----------------------------------------------------------------------

interface Compiled {
  rule: RRuleT;
  /** Occurrences by week (`floor(start / WEEK)`): those whose start instant falls in the week. */
  weeks: Map<number, number[]>;
}

const CACHE_LIMIT = 2_000;
const WEEKS_PER_RULE = 16;
const compiled = new Map<string, Compiled>();

const keyOf = (rec: Recurrence) => `${rec.rrule}\u0000${rec.dtstart}\u0000${rec.timezone}`;

function compile(rec: Recurrence): Compiled {
  const key = keyOf(rec);
  let c = compiled.get(key);
  if (c) {
    // Most recently used last.
    compiled.delete(key);
    compiled.set(key, c);
    return c;
  }
  c = { rule: floatingRule(rec), weeks: new Map() };
  compiled.set(key, c);
  const oldest = compiled.keys().next();
  if (compiled.size > CACHE_LIMIT && !oldest.done) compiled.delete(oldest.value);
  return c;
}

/** Start instants (ms) of the occurrences starting in week `w`, ascending. */
function week(c: Compiled, rec: Recurrence, w: number): number[] {
  let starts = c.weeks.get(w);
  if (starts) return starts;
  const lo = w * WEEK;
  const hi = lo + WEEK;
  // Wall clock and instants differ by the zone's offset (under a day, DST changes included):
  // a day of margin on either side, then the exact filter on instants.
  const floating = c.rule.between(new Date(lo - 2 * DAY), new Date(hi + 2 * DAY), true);
  starts = floating
    .map((d) => fromWall(d.getTime(), rec.timezone))
    .filter((t) => t >= lo && t < hi)
    .sort((a, b) => a - b);
  c.weeks.set(w, starts);
  const first = c.weeks.keys().next();
  if (c.weeks.size > WEEKS_PER_RULE && !first.done) c.weeks.delete(first.value);
  return starts;
}

/** The occurrences of the rule that overlap [from, to), by start. */
export function occurrences(rec: Recurrence, from: Date, to: Date): Span[] {
  const c = compile(rec);
  const dur = rec.durationMinutes * MINUTE;
  const lo = from.getTime() - dur;
  const out: Span[] = [];
  for (let w = Math.floor(lo / WEEK); w * WEEK < to.getTime(); w++)
    for (const s of week(c, rec, w))
      if (s + dur > from.getTime() && s < to.getTime())
        out.push({ start: new Date(s), end: new Date(s + dur) });
  return out;
}

/** True when an occurrence covers `at` (start ≤ at < end). */
export function recurrenceCovers(rec: Recurrence, at: Date): boolean {
  return occurrences(rec, at, new Date(at.getTime() + 1)).length > 0;
}

// ---- validation-time questions, bounded ---------------------------------------------------------

/** Thrown when evaluating a rule takes too long (a rule that never occurs makes rrule search to year 9999). */
export class RuleTooCostly extends Error {
  override name = "RuleTooCostly";
}

// One context and script for every bounded run (a new V8 context per call costs milliseconds).
const sandbox = vm.createContext({ run: () => undefined as unknown });
const runScript = new vm.Script("run()");

/**
 * Runs `fn` with a CPU budget: rrule cannot be interrupted otherwise (a rule that never occurs
 * makes it search to the year 9999, seconds for a DAILY one). The timeout of `vm` stops any
 * JavaScript running under it, rrule's included.
 */
function bounded<T>(fn: () => T, ms = 1_000): T {
  sandbox.run = fn;
  try {
    return runScript.runInContext(sandbox, { timeout: ms }) as T;
  } catch (err) {
    if ((err as { code?: string }).code === "ERR_SCRIPT_EXECUTION_TIMEOUT") throw new RuleTooCostly();
    throw err;
  } finally {
    sandbox.run = () => undefined;
  }
}

export interface Bounds {
  /** The first occurrence's start; null when the rule never occurs. */
  first: Date | null;
  /** The last occurrence's end; null when the schedule has no end (or its end is too far to find). */
  lastEnd: Date | null;
  /** The first occurrence ending after `now`; null when none does. */
  nextEndingAfterNow: Span | null;
}

/**
 * What a new recurring window needs to know about its schedule, within a CPU budget (throws
 * RuleTooCostly past it, which the caller reports as a schedule that never occurs).
 */
export function bounds(rec: Recurrence, now: Date): Bounds {
  const rule = floatingRule(rec);
  const dur = rec.durationMinutes * MINUTE;
  return bounded(() => {
    const f = rule.after(new Date(parseWall(rec.dtstart)), true);
    if (!f) return { first: null, lastEnd: null, nextEndingAfterNow: null };
    const first = new Date(fromWall(f.getTime(), rec.timezone));
    let lastEnd: Date | null = null;
    const opts = rule.origOptions;
    if (opts.count !== undefined && opts.count !== null) {
      const last = rule.all().at(-1);
      lastEnd = last ? new Date(fromWall(last.getTime(), rec.timezone) + dur) : null;
    } else if (opts.until) {
      const last = rule.before(opts.until, true);
      lastEnd = last ? new Date(fromWall(last.getTime(), rec.timezone) + dur) : null;
    }
    // The first occurrence ending after now starts after now - duration (a day of margin for
    // wall-clock arithmetic, then exact on instants).
    const from = toWall(now.getTime() - dur, rec.timezone) - DAY;
    let next: Span | null = null;
    rule.between(new Date(from), new Date(Date.UTC(9999, 0, 1)), true, (d) => {
      const s = fromWall(d.getTime(), rec.timezone);
      if (s + dur > now.getTime()) next = { start: new Date(s), end: new Date(s + dur) };
      return next === null;
    });
    return { first, lastEnd, nextEndingAfterNow: next };
  });
}

/**
 * The occurrence covering `now` or the next one; null when none is left. Looks a week ahead in
 * the cache first, then further within a CPU budget (null past it: a rule with years between
 * occurrences).
 */
export function nextSpan(rec: Recurrence, now: Date): Span | null {
  const near = occurrences(rec, now, new Date(now.getTime() + 8 * DAY));
  if (near[0]) return near[0];
  const dur = rec.durationMinutes * MINUTE;
  const rule = compile(rec).rule;
  try {
    return bounded(() => {
      let next: Span | null = null;
      rule.between(
        new Date(toWall(now.getTime(), rec.timezone) + 7 * DAY),
        new Date(Date.UTC(9999, 0, 1)),
        true,
        (d) => {
          const s = fromWall(d.getTime(), rec.timezone);
          if (s + dur > now.getTime()) next = { start: new Date(s), end: new Date(s + dur) };
          return next === null;
        },
      );
      return next;
    }, 50);
  } catch (err) {
    if (err instanceof RuleTooCostly) return null;
    throw err;
  }
}
