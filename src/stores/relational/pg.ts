import pg from "pg";
import type { Queryable, QueryResult, RelationalStore, Row } from "./types.js";

// int8 (count(*), sums of integers) comes back as a string by default; every int8 Vigil reads
// is far below 2^53, so numbers are both safe and what callers expect.
const types = {
  getTypeParser: ((oid: number, format?: string) => {
    if (oid === pg.types.builtins.INT8) return (v: string) => Number(v);
    if (oid === pg.types.builtins.NUMERIC) return (v: string) => Number(v);
    return pg.types.getTypeParser(oid, format as "text");
  }) as typeof pg.types.getTypeParser,
};

export interface PgStoreOptions {
  connectionString: string;
  max?: number;
  onError?: (err: Error) => void;
}

export function createPgStore(opts: PgStoreOptions): RelationalStore {
  const pool = new pg.Pool({
    connectionString: opts.connectionString,
    max: opts.max ?? 10,
    connectionTimeoutMillis: 5_000,
    idleTimeoutMillis: 30_000,
    // Timestamps are computed in UTC everywhere (date_trunc, rollup buckets).
    options: "-c TimeZone=UTC",
    types,
  });
  // An idle client whose server went away emits 'error'; unhandled it would kill the process.
  pool.on("error", (err) => opts.onError?.(err));

  const wrap = (c: pg.Pool | pg.PoolClient): Queryable => ({
    async query<R extends Row = Row>(text: string, params?: unknown[]): Promise<QueryResult<R>> {
      const r = await c.query(text, params);
      return { rows: r.rows as R[], rowCount: r.rowCount ?? 0 };
    },
    async exec(sql: string): Promise<void> {
      await c.query(sql);
    },
  });

  const base = wrap(pool);
  return {
    kind: "postgres",
    query: base.query,
    exec: base.exec,
    async transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
      const client = await pool.connect();
      try {
        await client.query("BEGIN");
        const result = await fn(wrap(client));
        await client.query("COMMIT");
        return result;
      } catch (err) {
        await client.query("ROLLBACK").catch(() => {});
        throw err;
      } finally {
        client.release();
      }
    },
    async ping() {
      await pool.query("SELECT 1");
    },
    async close() {
      await pool.end();
    },
  };
}
