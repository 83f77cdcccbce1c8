/** A row as both drivers return it: column name to value. */
export type Row = Record<string, unknown>;

export interface QueryResult<R extends Row = Row> {
  rows: R[];
  rowCount: number;
}

/** Anything that runs a parameterised statement: the store itself or an open transaction. */
/**
 * `prepare`: a name for a statement run many times a second (the probe scheduler's claim and
 * record, a series write): PostgreSQL parses and plans it once per connection instead of on every
 * call. Only for a fixed text; one name, one text. PGlite runs in the process and ignores it.
 */
export interface QueryOptions {
  prepare?: string;
}

export interface Queryable {
  query<R extends Row = Row>(text: string, params?: unknown[], opts?: QueryOptions): Promise<QueryResult<R>>;
  /** Runs several `;`-separated statements without parameters (migrations, DDL). */
  exec(sql: string): Promise<void>;
}

export type RelationalKind = "postgres" | "pglite";

/**
 * The relational store: PostgreSQL through a `pg` Pool, or PGlite embedded in the process.
 * Both speak the same SQL (PGlite is Postgres compiled to WASM), so every query in `sql/`
 * and in the services runs unchanged on either.
 */
export interface RelationalStore extends Queryable {
  readonly kind: RelationalKind;
  /** Runs `fn` in one transaction: committed when it resolves, rolled back when it throws. */
  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T>;
  /** Cheap round trip used by /readyz. */
  ping(): Promise<void>;
  close(): Promise<void>;
}
