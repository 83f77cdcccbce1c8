/**
 * The series tables, defined once. Both backends (QuestDB and SQL) derive their writes,
 * validation and keyset ordering from these definitions; the DDL in `sql/questdb/` and
 * `sql/postgres/` must match them (a contract test checks every column round-trips).
 *
 * Every table has a designated timestamp `ts` and an upsert key that starts with `ts`:
 * writing a row whose key already exists replaces it (QuestDB `DEDUP UPSERT KEYS`, SQL
 * `ON CONFLICT ... DO UPDATE`). That makes every write idempotent, so a retried batch, a
 * replayed heartbeat or a re-synced execution never counts twice.
 */

export type ColumnType = "symbol" | "string" | "boolean" | "double" | "long" | "timestamp";

export interface ColumnDef {
  type: ColumnType;
  nullable?: boolean;
}

export interface TableDef {
  name: string;
  columns: Record<string, ColumnDef>;
  /** Upsert key after `ts`; also the keyset tiebreaker for equal timestamps. */
  key: readonly string[];
}

const table = <const C extends Record<string, ColumnDef>, const K extends readonly (keyof C & string)[]>(
  name: string,
  columns: C,
  key: K,
) => ({ name, columns, key }) satisfies TableDef;

export const availabilitySamples = table(
  "availability_samples",
  {
    connection_id: { type: "symbol" },
    available: { type: "boolean" },
    response_time_ms: { type: "double", nullable: true },
    status_code: { type: "long", nullable: true },
    /** Why a check failed: timeout, connection_refused, http_status, bad_credentials, … */
    reason: { type: "symbol", nullable: true },
    error: { type: "string", nullable: true },
    /** True for gap-fill samples recorded for slots when no check could run. */
    synthetic: { type: "boolean" },
    /** probe, heartbeat or gap_fill. */
    source: { type: "symbol" },
    /**
     * Taken while a maintenance window covered the connection (docs/maintenance.md): kept and
     * read back, left out of uptime. Absent or null reads as false (rows from before the column).
     */
    maintenance: { type: "boolean", nullable: true },
  },
  ["connection_id"],
);

export const executions = table(
  "executions",
  {
    connection_id: { type: "symbol" },
    execution_id: { type: "string" },
    workflow_id: { type: "string", nullable: true },
    /** running, success, error, waiting, cancelled; a platform value Vigil does not know, as sent. */
    status: { type: "symbol" },
    mode: { type: "symbol", nullable: true },
    stopped_at: { type: "timestamp", nullable: true },
    duration_ms: { type: "double", nullable: true },
    error: { type: "string", nullable: true },
    /** The failing node (n8n) or module (Make), and the last step that ran (sql/questdb/003). */
    error_node: { type: "string", nullable: true },
    last_node: { type: "string", nullable: true },
    updated_at: { type: "timestamp" },
  },
  ["connection_id", "execution_id"],
);

export const usageEntries = table(
  "usage_entries",
  {
    id: { type: "string" },
    connection_id: { type: "symbol" },
    entity: { type: "string" },
    usage_amount: { type: "double" },
    usage_entity: { type: "symbol" },
    custom_name: { type: "string", nullable: true },
    cost_cents: { type: "double" },
    workflow_id: { type: "string", nullable: true },
    execution_id: { type: "string", nullable: true },
    /** JSON text of the entry's free-form metadata. */
    metadata: { type: "string", nullable: true },
  },
  ["id"],
);

export const gatewayHeartbeats = table(
  "gateway_heartbeats",
  {
    connection_id: { type: "symbol" },
    heartbeat_id: { type: "string" },
    status: { type: "symbol" },
    healthy: { type: "boolean" },
    latency_ms: { type: "double", nullable: true },
    version: { type: "string", nullable: true },
    pid_alive: { type: "boolean" },
    /** JSON text of the heartbeat's `system` object. */
    system: { type: "string", nullable: true },
    period_start: { type: "timestamp", nullable: true },
    period_end: { type: "timestamp", nullable: true },
    input_tokens: { type: "long" },
    output_tokens: { type: "long" },
    cache_read_tokens: { type: "long" },
    cache_write_tokens: { type: "long" },
    request_count: { type: "long" },
    cost_usd: { type: "double" },
    received_at: { type: "timestamp" },
  },
  ["connection_id", "heartbeat_id"],
);

export const gatewayModelUsage = table(
  "gateway_model_usage",
  {
    connection_id: { type: "symbol" },
    heartbeat_id: { type: "string" },
    model: { type: "symbol" },
    input_tokens: { type: "long" },
    output_tokens: { type: "long" },
    cost_usd: { type: "double" },
    /** reported (by the daemon), priced (from the pricing table) or unpriced (unknown model, cost 0). */
    cost_source: { type: "symbol" },
  },
  ["connection_id", "heartbeat_id", "model"],
);

const rollupColumns = {
  connection_id: { type: "symbol" },
  /** Samples in the bucket, synthetic ones included, those under maintenance not. */
  checks: { type: "long" },
  /** Samples with available = true. */
  available: { type: "long" },
  /** Sum and number of the response times that were recorded (not null). */
  response_ms_sum: { type: "double" },
  response_ms_count: { type: "long" },
  /**
   * Samples taken under maintenance (docs/maintenance.md), counted here and nowhere else: checks,
   * available and the response times leave them out. Null in rows written before the column.
   */
  maintenance: { type: "long", nullable: true },
} as const;

/**
 * Availability per connection and UTC day, rolled up from the raw samples by the rollup job and
 * kept long after the raw samples expire (see docs/operations.md: Retention and rollups). `ts` is the day's start.
 */
export const availabilityDaily = table("availability_daily", rollupColumns, ["connection_id"]);

/** Availability per connection and UTC calendar month, rolled up from the daily rows. */
export const availabilityMonthly = table("availability_monthly", rollupColumns, ["connection_id"]);

/**
 * The day still in progress, rolled up to a watermark: each rollup run writes one row per
 * connection for [start of the watermark's day, watermark) with `ts` the watermark itself, so a
 * run never changes the rows an earlier run's readers use (retention/rollups.ts). Kept two days.
 */
export const availabilityPartial = table("availability_partial", rollupColumns, ["connection_id"]);

/**
 * The anomaly detector's 5-minute aggregates (src/anomalies/buckets.ts), rolled up from the raw
 * tables, from which the baselines are read: a window on 7 days is a few rows per connection
 * instead of every sample in it. `ts` is the bucket's start; `metric` one of the detector's metrics; for the percentile metrics
 * (response_time, gateway_latency) one row per logarithmic bin of the values (`bin` ≥ 0, `n`
 * values summing to `total`), for the others one row with `bin` −1: failure_rate `n` checks of
 * which `total` failed, execution_failure_rate `n` finished runs of which `total` failed,
 * token_volume and token_spend `n` rows adding up to `total` tokens or US dollars. Kept 9 days
 * (a window and its 7 baseline days, and the catch-up).
 */
export const anomalyBuckets = table(
  "anomaly_buckets",
  {
    connection_id: { type: "symbol" },
    metric: { type: "symbol" },
    bin: { type: "long" },
    n: { type: "long" },
    total: { type: "double" },
  },
  ["connection_id", "metric", "bin"],
);

export const seriesTables = {
  availabilitySamples,
  executions,
  usageEntries,
  gatewayHeartbeats,
  gatewayModelUsage,
  availabilityDaily,
  availabilityMonthly,
  availabilityPartial,
  anomalyBuckets,
} as const;

export type SeriesTable = (typeof seriesTables)[keyof typeof seriesTables];

type ValueOf<T extends ColumnType> = T extends "symbol" | "string"
  ? string
  : T extends "boolean"
    ? boolean
    : T extends "double" | "long"
      ? number
      : Date;

type Nullable<D extends ColumnDef> = D extends { nullable: true } ? true : false;

/** The row type of a table: `ts` plus every column, nullable columns optional. */
export type RowOf<T extends TableDef> = { ts: Date } & {
  -readonly [K in keyof T["columns"] as Nullable<T["columns"][K]> extends true ? never : K]: ValueOf<
    T["columns"][K]["type"]
  >;
} & {
  -readonly [K in keyof T["columns"] as Nullable<T["columns"][K]> extends true ? K : never]?: ValueOf<
    T["columns"][K]["type"]
  > | null;
};
