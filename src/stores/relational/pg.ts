import pg from "pg";
import { isConnectionFailure, StoreUnavailableError } from "../errors.js";
import type { Queryable, QueryOptions, QueryResult, RelationalStore, Row } from "./types.js";
import { storeTimer } from "../../lib/metrics.js";

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

/**
 * A driver error that means PostgreSQL is unavailable (stopped, restarting, unreachable) becomes a
 * StoreUnavailableError, which the doors answer with 503 and Retry-After; any other error (a
 * statement the server refused) is left as it is. The pool reconnects by itself when the server
 * is back: a connection that died is dropped, the next query opens a new one.
 */
const classify = (err: unknown): unknown =>
  err instanceof StoreUnavailableError || !isConnectionFailure(err)
    ? err
    : new StoreUnavailableError("relational", err);

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

  const timed = storeTimer("postgres");
  const wrap = (c: pg.Pool | pg.PoolClient): Queryable => ({
    async query<R extends Row = Row>(
      text: string,
      params?: unknown[],
      opts?: QueryOptions,
    ): Promise<QueryResult<R>> {
      const done = timed();
      try {
        const r = opts?.prepare
          ? await c.query({ name: opts.prepare, text, values: params })
          : await c.query(text, params);
        done(true);
        return { rows: r.rows as R[], rowCount: r.rowCount ?? 0 };
      } catch (err) {
        done(false);
        throw classify(err);
      }
    },
    async exec(sql: string): Promise<void> {
      const done = timed();
      try {
        await c.query(sql);
        done(true);
      } catch (err) {
        done(false);
        throw classify(err);
      }
    },
  });

  const base = wrap(pool);
  return {
    kind: "postgres",
    query: base.query,
    exec: base.exec,
    async transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
      let client: pg.PoolClient;
      try {
        client = await pool.connect();
      } catch (err) {
        throw classify(err);
      }
      let broken: Error | undefined;
      // pg-pool listens for a client's errors only while it is idle: one that dies while checked
      // out here (PostgreSQL restarted, the network cut) would emit 'error' with no listener and
      // end the process. The statement under way rejects instead, and the client is dropped.
      const onError = (err: Error) => {
        broken = err;
      };
      client.on("error", onError);
      try {
        const tx = wrap(client);
        await tx.exec("BEGIN");
        const result = await fn(tx);
        await tx.exec("COMMIT");
        return result;
      } catch (err) {
        // a connection that died cannot roll back; it is then dropped instead of going back to the pool
        await client.query("ROLLBACK").catch((rollbackErr: unknown) => {
          broken = rollbackErr instanceof Error ? rollbackErr : new Error(String(rollbackErr));
        });
        throw classify(err);
      } finally {
        client.removeListener("error", onError);
        client.release(broken);
      }
    },
    async ping() {
      await base.query("SELECT 1");
    },
    async close() {
      await pool.end();
    },
  };
}
