import path from "node:path";
import { PGlite, types as pgliteTypes } from "@electric-sql/pglite";
import { storeTimer } from "../../lib/metrics.js";
import { type DirLock, lockDataDir } from "./dir-lock.js";
import type { Queryable, QueryResult, RelationalStore, Row } from "./types.js";

export interface PgliteStoreOptions {
  /** Folder for the database files; undefined keeps everything in memory (tests). */
  dataDir?: string;
}

// Same conventions as the pg driver: int8 and numeric as numbers.
const parsers = {
  [pgliteTypes.INT8]: (v: string) => Number(v),
  [pgliteTypes.NUMERIC]: (v: string) => Number(v),
};

export async function createPgliteStore(opts: PgliteStoreOptions = {}): Promise<RelationalStore> {
  let lock: DirLock | undefined;
  let db: PGlite;
  if (opts.dataDir) {
    lock = lockDataDir(opts.dataDir);
    try {
      db = await PGlite.create(path.join(opts.dataDir, "pglite"), { parsers });
    } catch (err) {
      lock.release();
      throw err;
    }
  } else {
    db = await PGlite.create({ parsers });
  }
  await db.exec("SET TIME ZONE 'UTC'");

  const timed = storeTimer("pglite");
  const wrap = (c: Pick<PGlite, "query" | "exec">): Queryable => ({
    async query<R extends Row = Row>(text: string, params?: unknown[]): Promise<QueryResult<R>> {
      const done = timed();
      try {
        const r = await c.query<R>(text, params);
        done(true);
        return { rows: r.rows, rowCount: r.affectedRows ?? r.rows.length };
      } catch (err) {
        done(false);
        throw err;
      }
    },
    async exec(sql: string): Promise<void> {
      const done = timed();
      try {
        await c.exec(sql);
        done(true);
      } catch (err) {
        done(false);
        throw err;
      }
    },
  });
  const base = wrap(db);
  let closed = false;
  return {
    kind: "pglite",
    query: base.query,
    exec: base.exec,
    transaction: (fn) => db.transaction((tx) => fn(wrap(tx))),
    async ping() {
      await db.query("SELECT 1");
    },
    async close() {
      if (closed) return;
      closed = true;
      try {
        await db.close();
      } finally {
        lock?.release();
      }
    },
  };
}
