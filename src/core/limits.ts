import { z } from "zod";

/**
 * The documented bounds of every number Vigil accepts from outside (docs/api.md: Input rules). Each
 * is far above any real value, and low enough that totals over any number of rows a store can
 * hold stay exact (tokens: a QuestDB `long` sum of a billion rows at the bound still fits in 2^63)
 * and finite (money, amounts: doubles).
 */
export const LIMITS = {
  /** Tokens or requests in one heartbeat period or one model's row. */
  tokens: 1e12,
  /** US dollars in one heartbeat period or model row. */
  costUsd: 1e8,
  /** Cents in one usage entry. */
  costCents: 1e10,
  /** A usage entry's amount (tokens or a custom unit). */
  usageAmount: 1e12,
  /** A reported latency, in milliseconds (an hour). */
  latencyMs: 3_600_000,
} as const;

/**
 * The instants Vigil accepts from outside (read windows, usage date ranges, heartbeat periods):
 * from the Unix epoch to the end of year 9999, UTC. Every store holds them, and a window computed
 * from one (a week before, the month it falls in) stays in years every store and driver can write
 * (PostgreSQL has no year 0; `Date.toISOString` writes years past 9999 as `+010000`).
 */
export const TIME_RANGE = {
  earliest: Date.UTC(1970, 0, 1),
  latest: Date.UTC(9999, 11, 31, 23, 59, 59, 999),
  text: "from 1970-01-01T00:00:00Z to 9999-12-31T23:59:59Z",
} as const;

/** An ISO 8601 timestamp with an offset (`Z` or `±hh:mm`, any fraction of a second) in TIME_RANGE. */
export const isoTimestamp = (example = "2026-01-05T00:00:00Z") =>
  z.iso
    .datetime({ offset: true, error: `must be an ISO 8601 timestamp with an offset, e.g. ${example}` })
    .refine((s) => {
      const t = Date.parse(s);
      return t >= TIME_RANGE.earliest && t <= TIME_RANGE.latest;
    }, `must be a time ${TIME_RANGE.text}`)
    .describe(`ISO 8601 with an offset (Z or ±hh:mm), ${TIME_RANGE.text}`);
