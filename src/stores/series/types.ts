import type { RowOf, SeriesTable, seriesTables } from "./tables.js";

export type FilterValue = string | number | boolean;

/** A condition on one column. Column names are checked against the table definition. */
export type Filter =
  | { column: string; op: "eq" | "ne"; value: FilterValue }
  | { column: string; op: "in"; value: readonly FilterValue[] }
  /**
   * Rows whose column is in one of the groups, each group with its own lower bound on `ts`:
   * `(col IN (g1) AND ts >= since1) OR (col IN (g2) AND ts >= since2) …`. Retention uses it to
   * hide rows older than each connection's plan keeps.
   */
  | { column: string; op: "inSince"; groups: readonly { values: readonly FilterValue[]; since: Date }[] };

/** A position in newest-first order: a row's timestamp plus its key values (tiebreaker). */
export interface Position {
  ts: Date;
  key: string[];
}

export interface PageQuery {
  where?: Filter[];
  /** Inclusive lower bound on `ts`. */
  since?: Date;
  /** Exclusive upper bound on `ts`. */
  until?: Date;
  /** Continue after this row (exclusive), newest first. */
  after?: Position;
  /** Rows to skip (offset pagination, for the endpoints the spec pages by offset). */
  offset?: number;
  limit: number;
}

export interface Page<R> {
  rows: R[];
  /** Position of the last row returned when more rows follow, else null. */
  next: Position | null;
}

/** Calendar buckets (five_minutes: aligned to :00, :05, …), or `all` for one row per group over the whole range. */
export type Bucket = "minute" | "five_minutes" | "hour" | "day" | "week" | "month" | "all";

/**
 * Groups rows also by a logarithmic bin of a numeric column, returned as `bin`:
 * `floor(log2(value + 1) · perDoubling + 1e-9)` (null for a null value), the same whole number on both
 * backends. With `count` and `sum` per bin, a percentile of many buckets merged is found from
 * the bins (src/anomalies/windows.ts) within 2^(1/perDoubling) of the exact value.
 */
export interface LogBin {
  column: string;
  perDoubling: number;
}

export type Measure =
  /** Rows, or with a column the rows where it is not null. */
  | { fn: "count"; column?: string; unless?: string }
  | { fn: "sum" | "avg" | "min" | "max"; column: string; unless?: string }
  /** Number of rows where a boolean column is true. */
  | { fn: "countTrue"; column: string; unless?: string }
  /**
   * The `p`-th percentile (0 < p < 1) of a numeric column's non-null values, nearest rank (the
   * value at rank ceil(p · n)), exact on both backends: `percentile_disc` on SQL, window functions
   * on QuestDB, which computes it only over the whole range (`bucket: "all"`).
   */
  | { fn: "percentile"; column: string; p: number };
// `unless`: a boolean column; rows where it is true are left out of that measure (and only of
// it: `maintenance` samples count apart from uptime). Null counts as false on every backend.

export interface AggregateQuery {
  /** UTC calendar buckets; weeks start on Monday (ISO), as both backends align them. */
  bucket: Bucket;
  where?: Filter[];
  since?: Date;
  until?: Date;
  groupBy?: string[];
  /** Also group by a logarithmic bin of a numeric column (no percentile measures with it). */
  bin?: LogBin;
  measures: Record<string, Measure>;
}

/** One bucket: its start (null for `all`), the group-by values, and one number (or null) per measure. */
export type AggregateRow = { bucket: Date | null } & Record<string, string | number | Date | null>;

type Tables = typeof seriesTables;
/** Rows for one table, for writes that span several tables; each batch is typed by its table. */
export type TableRows = {
  [K in keyof Tables]: { table: Tables[K]; rows: readonly RowOf<Tables[K]>[] };
}[keyof Tables];

/** Rows before `before` expire unless their connection_id is in `keep`. */
export interface ExpiryRule {
  before: Date;
  keep: readonly string[];
}

export type SeriesKind = "questdb" | "sql";

/**
 * The time-series store. `append` resolves only once the store has committed the rows
 * (QuestDB: the ILP/HTTP request acknowledged, i.e. written to the WAL; SQL: the transaction
 * committed). Concurrent appends share one flush (group commit).
 */
export interface SeriesStore {
  readonly kind: SeriesKind;
  /** Validates then writes the rows; rows whose key exists replace the stored row. */
  append<T extends SeriesTable>(table: T, rows: readonly RowOf<T>[]): Promise<void>;
  /**
   * Writes rows of several tables in one flush; validated as a whole first. The tables are not
   * committed atomically together, but every write is an idempotent upsert, so a caller that
   * retries after a failure never counts twice.
   */
  write(batches: readonly TableRows[]): Promise<void>;
  /** Rows handed to `append`/`write` that are not yet committed or failed (queued or in flight). */
  backlog(): number;
  /** Number of rows matching the filters and bounds. */
  count(table: SeriesTable, query: Pick<PageQuery, "where" | "since" | "until">): Promise<number>;
  /** Newest-first keyset page. */
  page<T extends SeriesTable>(table: T, query: PageQuery): Promise<Page<RowOf<T>>>;
  /** Time-bucketed aggregates, oldest bucket first. */
  aggregate(table: SeriesTable, query: AggregateQuery): Promise<AggregateRow[]>;
  /**
   * Physically removes expired rows (retention): a row expires under a rule when its `ts` is
   * before the rule's `before` and its connection is not in the rule's `keep` list. The SQL
   * backend deletes exactly those rows; QuestDB, which cannot delete rows, drops or rewrites
   * whole partitions once every row in them is older than the rule's bound. Resolves with the
   * number of rows removed.
   */
  expire(table: SeriesTable, rules: readonly ExpiryRule[]): Promise<number>;
  /** Resolves once every write acknowledged before the call is visible to reads. */
  waitVisible(timeoutMs?: number): Promise<void>;
  ping(): Promise<void>;
  /** Waits for pending writes to finish, then releases connections. */
  close(): Promise<void>;
}

/** A row or query that does not fit the table: names the field. Maps to a 400. */
export class SeriesValidationError extends Error {
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(`${field}: ${message}`);
    this.name = "SeriesValidationError";
  }
}

/** The store could not be reached or refused to commit: nothing was acknowledged. Maps to a 503. */
export class SeriesUnavailableError extends Error {
  constructor(
    readonly store: SeriesKind,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = "SeriesUnavailableError";
  }
}
