/**
 * The budget month: the UTC calendar month, written `YYYY-MM`. Pure functions, no clock: callers
 * pass `ctx.now()`.
 */

export interface Month {
  /** `YYYY-MM`. */
  label: string;
  /** First instant of the month (UTC midnight of the 1st). */
  start: Date;
  /** First instant of the next month. */
  end: Date;
}

export function monthOf(at: Date): Month {
  const y = at.getUTCFullYear();
  const m = at.getUTCMonth();
  return {
    label: `${y}-${String(m + 1).padStart(2, "0")}`,
    start: new Date(Date.UTC(y, m, 1)),
    end: new Date(Date.UTC(y, m + 1, 1)),
  };
}

/** A run rate is not trusted before this much of the month has passed (no projected-overrun warning). */
export const MIN_PROJECTION_MS = 24 * 3_600_000;

/**
 * The run-rate projection to the month's end: spend so far divided by the time elapsed since the
 * month began, times the month's length (`spent × month length ÷ elapsed`). At the month's first
 * instant it is the spend itself.
 */
export function projectToMonthEnd(spent: number, month: Month, at: Date): number {
  const elapsed = at.getTime() - month.start.getTime();
  if (elapsed <= 0) return spent;
  const length = month.end.getTime() - month.start.getTime();
  return (spent * length) / Math.min(elapsed, length);
}
