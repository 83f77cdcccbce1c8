export const PLANS = ["free", "pro", "scale", "enterprise"] as const;
export type Plan = (typeof PLANS)[number];

/**
 * Requests per hour for REST API keys, per account (see docs/api.md: API keys, visibility and rate limits). Free and pro are
 * the spec's figures; scale is our choice; enterprise is a default that an account's
 * `rate_limit_per_hour` overrides.
 */
export const API_RATE_LIMIT_PER_HOUR: Record<Plan, number> = {
  free: 100,
  pro: 1_000,
  scale: 10_000,
  enterprise: 100_000,
};

/** Heartbeat ingestion keys are limited per gateway connection, apart from the account's REST budget. */
export const INGEST_RATE_LIMIT_PER_HOUR: Record<Plan, number> = {
  free: 3_600,
  pro: 36_000,
  scale: 36_000,
  enterprise: 360_000,
};

/**
 * Days of raw availability samples kept, per plan (docs/operations.md: Retention and rollups). Free, pro and scale are
 * the product's figures; enterprise is our choice and also the QuestDB table's TTL, the longest
 * any sample is kept.
 */
export const RAW_RETENTION_DAYS: Record<Plan, number> = {
  free: 7,
  pro: 30,
  scale: 90,
  enterprise: 365,
};

/** Check interval by plan, in seconds, and the shortest a connection may ask for. */
export const CHECK_INTERVAL_SECONDS: Record<Plan, { default: number; minimum: number }> = {
  free: { default: 300, minimum: 60 },
  pro: { default: 60, minimum: 30 },
  scale: { default: 30, minimum: 10 },
  enterprise: { default: 30, minimum: 10 },
};
