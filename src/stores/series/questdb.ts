import fs from "node:fs";
import path from "node:path";
import pg from "pg";
import { sqlDir } from "../../lib/paths.js";
import { isConnectionFailure } from "../errors.js";
import { seriesCommitObserver, storeTimer, watchBacklog } from "../../lib/metrics.js";
import { traced } from "../../lib/tracing.js";
import { GroupCommit } from "./group-commit.js";
import { groupCommitWrites, type WriteItem } from "./writes.js";
import { IlpHttp, IlpRejectedError, type LineEncoder, lineEncoder } from "./ilp.js";
import { expireQuestdbTable } from "./questdb-expire.js";
import { commitSpan, toAggregateRow, toPage } from "./sql.js";
import {
  afterClause,
  binSql,
  checkGroupBy,
  measureSql,
  orderNewestFirst,
  Params,
  toNumberOrNull,
  whereClauses,
} from "./sql-builders.js";
import { type RowOf, type SeriesTable, seriesTables, type TableDef } from "./tables.js";
import {
  type AggregateQuery,
  type AggregateRow,
  type Measure,
  type Page,
  type PageQuery,
  type SeriesStore,
  SeriesUnavailableError,
} from "./types.js";

export interface QuestdbOptions {
  /** HTTP address for ILP writes, e.g. http://127.0.0.1:9000 (user:pass@ for basic auth). */
  httpUrl: string;
  /** pg-wire address for reads and DDL. */
  pgUrl: string;
  /** Prepended to every table name; lets tests share one server without seeing each other's rows. */
  tablePrefix?: string;
  /** Flushes in flight at once, each over its own HTTP connection. */
  writers?: number;
  requestTimeoutMs?: number;
  /** Called with every read statement before it is sent (benchmarks replay them directly). */
  onQuery?: (sql: string, params: unknown[]) => void;
}

const bucketUnit = {
  minute: "1m",
  five_minutes: "5m",
  hour: "1h",
  day: "1d",
  week: "1w",
  month: "1M",
} as const;
const names = (cols: string[]) => cols.map((g) => `, ${g}`).join("");

/** QuestDB sends TIMESTAMP as text without a zone; it is UTC. int8 as numbers, as elsewhere. */
const types = {
  getTypeParser: ((oid: number, format?: string) => {
    if (oid === pg.types.builtins.TIMESTAMP || oid === pg.types.builtins.TIMESTAMPTZ)
      return (v: string) => new Date(`${v.replace(" ", "T").replace(/Z$|[+-]\d\d(:?\d\d)?$/, "")}Z`);
    if (oid === pg.types.builtins.INT8) return (v: string) => Number(v);
    return pg.types.getTypeParser(oid, format as "text");
  }) as typeof pg.types.getTypeParser,
};

export function questdbPool(pgUrl: string, max = 4): pg.Pool {
  const pool = new pg.Pool({ connectionString: pgUrl, max, connectionTimeoutMillis: 5_000, types });
  pool.on("error", () => {});
  return pool;
}

/** Statements of the `sql/questdb/*.sql` files in order, table names prefixed. */
export function questdbDdl(prefix = ""): string[] {
  const dir = path.join(sqlDir, "questdb");
  const names = Object.values(seriesTables).map((t) => t.name);
  return fs
    .readdirSync(dir)
    .filter((f) => f.endsWith(".sql"))
    .sort()
    .flatMap((f) =>
      fs
        .readFileSync(path.join(dir, f), "utf8")
        .replace(/--.*$/gm, "")
        .split(/;\s*$/m)
        .map((s) => s.trim())
        .filter(Boolean)
        .map((s) => (prefix ? s.replace(new RegExp(`\\b(${names.join("|")})\\b`, "g"), `${prefix}$1`) : s)),
    );
}

/**
 * Runs the DDL at every start. `ALTER TABLE t ADD COLUMN IF NOT EXISTS c …` cannot be sent as is:
 * QuestDB refuses it on a WAL table whose column exists ("statement is either no-op …"), and it
 * applies a WAL table's structure change asynchronously, so a second ALTER sent at once can meet
 * the same refusal. So such a statement runs only when the column is missing, and the next one
 * waits until the column is there.
 */
export async function applyQuestdbSchema(pool: pg.Pool, prefix = ""): Promise<void> {
  for (const stmt of questdbDdl(prefix)) {
    const add = /^ALTER TABLE\s+(\w+)\s+ADD COLUMN IF NOT EXISTS\s+(\w+)/i.exec(stmt);
    if (!add) {
      await pool.query(stmt);
      continue;
    }
    const [, table, column] = add as unknown as [string, string, string];
    const has = async () =>
      (
        await pool.query<{ column: string }>(
          `SELECT "column" FROM table_columns('${table}') WHERE "column" = $1`,
          [column],
        )
      ).rows.length > 0;
    if (await has()) continue;
    await pool.query(stmt);
    for (let i = 0; i < 100 && !(await has()); i++) await new Promise((r) => setTimeout(r, 50));
  }
}

const isDataError = (err: unknown) => err instanceof IlpRejectedError;

/** The QuestDB store; its table prefix is exposed for tests and tools that inspect the tables. */
export interface QuestdbSeriesStore extends SeriesStore {
  readonly tablePrefix: string;
}

export async function createQuestdbSeriesStore(opts: QuestdbOptions): Promise<QuestdbSeriesStore> {
  const prefix = opts.tablePrefix ?? "";
  const pool = questdbPool(opts.pgUrl);
  const writers = opts.writers ?? 1;
  const ilp = new IlpHttp({
    httpUrl: opts.httpUrl,
    requestTimeoutMs: opts.requestTimeoutMs ?? 10_000,
    retryTimeoutMs: 1_000,
    connections: writers,
  });
  const nameOf = (t: TableDef) => prefix + t.name;
  const encoders = new Map(Object.values(seriesTables).map((t) => [t.name, lineEncoder(nameOf(t), t)]));

  const commit = new GroupCommit<WriteItem>({
    // One flush at a time: while it is out, callers pile up into the next one, so requests are
    // fewer and larger. Measured on 2 cores: two writers made smaller flushes and less throughput.
    maxInFlight: writers,
    maxItems: 100_000,
    isDataError,
    observe: seriesCommitObserver("questdb"),
    flush: traced("vigil.series.commit", commitSpan("questdb"), async (items) => {
      let text = "";
      for (const it of items) text += (encoders.get(it.table.name) as LineEncoder)(it.row);
      try {
        // Resolves when QuestDB answered 204: the rows are committed to the tables' WAL.
        await ilp.write(text);
      } catch (err) {
        if (isDataError(err)) throw err;
        throw new SeriesUnavailableError("questdb", `QuestDB write failed: ${(err as Error).message}`, {
          cause: err,
        });
      }
    }),
  });
  watchBacklog("questdb", commit);

  const tsParam = (d: Date) => d.toISOString();
  const unavailable = (err: unknown) =>
    (err as { code?: string }).code === undefined ||
    isConnectionFailure(err) ||
    /ECONN|timeout/i.test(String(err));
  const down = (err: unknown) =>
    new SeriesUnavailableError("questdb", `QuestDB query failed: ${(err as Error).message}`, { cause: err });
  const timed = storeTimer("questdb");
  const query = async (sql: string, params: unknown[]) => {
    const done = timed();
    try {
      const r = await queryOnce(sql, params);
      done(true);
      return r;
    } catch (err) {
      done(false);
      throw err;
    }
  };
  const queryOnce = async (sql: string, params: unknown[]) => {
    opts.onQuery?.(sql, params);
    try {
      return await pool.query(sql, params);
    } catch (err) {
      if (unavailable(err)) throw down(err);
      // QuestDB going down answers some statements with an error of its own before it stops
      // accepting connections: an error while it no longer answers `SELECT 1` is unavailability
      // (503, retried), not a statement it refused (found by test/faults/store-restart.test.ts).
      // It may still answer `SELECT 1` for a moment while its tables already refuse reads (a
      // stop waits for its workers, the WAL apply worker among them), so the statement is asked
      // once more shortly after: a server going down then fails it as unavailable, and only a
      // statement QuestDB refuses twice while it answers is an error of the statement.
      if (!(await answers())) throw down(err);
      await new Promise((r) => setTimeout(r, 200));
      try {
        return await pool.query(sql, params);
      } catch (again) {
        if (unavailable(again) || !(await answers())) throw down(again);
        throw again;
      }
    }
  };
  /** Whether QuestDB answers a trivial statement within a second (asked only after an error). */
  const answers = async () => {
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        pool.query("SELECT 1"),
        new Promise((_, reject) => {
          timer = setTimeout(() => reject(new Error("no answer within 1 s")), 1_000);
        }),
      ]);
      return true;
    } catch {
      return false;
    } finally {
      clearTimeout(timer);
    }
  };

  /**
   * An aggregate with percentiles, over the whole range (`bucket: "all"`). QuestDB's own
   * approx_percentile costs about 13 ms per group at 5 significant digits (20 s for an hour of
   * 1,000 connections' checks), so each percentile is the exact nearest-rank value instead, by
   * window functions: in each group the non-null values ranked, the one at rank ceil(p · n)
   * kept, the same value `percentile_disc` gives on SQL. The statements run one after another,
   * so one aggregate never holds more than one pool connection.
   */
  async function withPercentiles(
    table: SeriesTable,
    q: AggregateQuery,
    percentiles: [string, Measure][],
  ): Promise<AggregateRow[]> {
    if (q.bucket !== "all") throw new Error("percentiles are computed over the whole range (bucket all)");
    const groupBy = checkGroupBy(table, q);
    const plain = Object.fromEntries(Object.entries(q.measures).filter(([, m]) => m.fn !== "percentile"));
    const rows = await store.aggregate(table, { ...q, measures: { ...plain, _n: { fn: "count" } } });
    const keyOf = (r: Record<string, unknown>) => JSON.stringify(groupBy.map((g) => r[g] ?? null));
    const byKey = new Map(rows.map((r) => [keyOf(r), r]));
    for (const [alias, m] of percentiles) {
      if (m.fn !== "percentile") continue;
      measureSql(table, alias, m, "questdb"); // checks the column, the alias and p
      const p = new Params();
      const conds = [...whereClauses(table, q, p, tsParam), `${m.column} IS NOT NULL`];
      const part = groupBy.length ? `PARTITION BY ${groupBy.join(", ")} ` : "";
      const sql =
        `SELECT ${[...groupBy, `max(${m.column}) AS ${alias}`].join(", ")} FROM (` +
        `SELECT ${[...groupBy, m.column].join(", ")}, row_number() OVER (${part}ORDER BY ${m.column}) AS rn_, ` +
        `count() OVER (${part.trim()}) AS n_ FROM ${nameOf(table)} WHERE ${conds.join(" AND ")}` +
        `) WHERE rn_ = ceil(${m.p} * n_)`;
      const res = await query(sql, p.values);
      for (const r of res.rows) {
        const row = byKey.get(keyOf(r));
        if (row) row[alias] = toNumberOrNull(r[alias]);
      }
    }
    return rows.map(({ _n: _count, ...r }) => {
      const out = r as AggregateRow;
      for (const [alias] of percentiles) if (!(alias in out)) out[alias] = null;
      return out;
    });
  }

  const store: QuestdbSeriesStore = {
    kind: "questdb",
    tablePrefix: prefix,
    ...groupCommitWrites(commit),

    async count(table, q) {
      const p = new Params();
      const conds = whereClauses(table, q, p, tsParam);
      const res = await query(
        `SELECT count() AS n FROM ${nameOf(table)}${conds.length ? ` WHERE ${conds.join(" AND ")}` : ""}`,
        p.values,
      );
      return Number(res.rows[0]?.n ?? 0);
    },

    /**
     * Two statements, because QuestDB sorts by (ts, key) only by sorting every matching row (10 s
     * for a page deep in 43 M rows), while it reads newest-first by ts alone as a backward scan
     * that stops at the limit. The first finds the timestamp of the row just past the page that
     * way; the second sorts only the rows from that timestamp on: at most the page plus the rows
     * tied at that timestamp, and no row the page needs is older than it.
     */
    async page<T extends SeriesTable>(table: T, q: PageQuery): Promise<Page<RowOf<T>>> {
      const p = new Params();
      const conds = whereClauses(table, q, p, tsParam);
      if (q.after) {
        // the redundant ts <= bound lets QuestDB scan only the partitions before the cursor
        conds.push(`ts <= ${p.add(tsParam(q.after.ts))}`);
        conds.push(afterClause(table, q.after, p, tsParam));
      }
      const upto = Math.trunc(q.offset ?? 0) + Math.trunc(q.limit) + 1;
      const where = conds.length ? ` WHERE ${conds.join(" AND ")}` : "";
      // QuestDB's LIMIT lo, hi takes rows lo+1 .. hi: here the row just past the page
      const edge = await query(
        `SELECT ts FROM ${nameOf(table)}${where} ORDER BY ts DESC LIMIT ${upto - 1}, ${upto}`,
        p.values,
      );
      const oldest = edge.rows[0]?.ts as Date | undefined;
      const bounded = oldest ? [...conds, `ts >= ${p.add(tsParam(oldest))}`] : conds;
      const cols = ["ts", ...Object.keys(table.columns)];
      const sql =
        `SELECT ${cols.join(", ")} FROM ${nameOf(table)}` +
        (bounded.length ? ` WHERE ${bounded.join(" AND ")}` : "") +
        ` ORDER BY ${orderNewestFirst(table)}` +
        ` LIMIT ${Math.trunc(q.offset ?? 0)}, ${upto}`;
      const res = await query(sql, p.values);
      return toPage<T>(table, res.rows, q.limit);
    },

    async aggregate(table, q: AggregateQuery): Promise<AggregateRow[]> {
      const bin = binSql(table, q); // checked first: a binned query has no percentile
      const percentiles = Object.entries(q.measures).filter(([, m]) => m.fn === "percentile");
      if (percentiles.length > 0) return withPercentiles(table, q, percentiles);
      const groupBy = checkGroupBy(table, q);
      const p = new Params();
      const conds = whereClauses(table, q, p, tsParam);
      const measures = Object.entries(q.measures).map(([alias, m]) => measureSql(table, alias, m, "questdb"));
      const where = conds.length ? ` WHERE ${conds.join(" AND ")}` : "";
      // QuestDB groups by every selected expression that is not an aggregate, the bin too
      const keys = bin ? [...groupBy, `${bin}::long AS bin`] : groupBy;
      const order = bin ? [...groupBy, "bin"] : groupBy;
      const sql =
        q.bucket === "all"
          ? // no SAMPLE BY: QuestDB groups by the non-aggregated columns
            `SELECT ${[...keys, ...measures].join(", ")} FROM ${nameOf(table)}${where}` +
            (order.length ? ` ORDER BY ${order.join(", ")}` : "")
          : `SELECT ts AS bucket${names(keys)}, ${measures.join(", ")} FROM ${nameOf(table)}${where}` +
            ` SAMPLE BY ${bucketUnit[q.bucket]} ALIGN TO CALENDAR ORDER BY bucket${names(order)}`;
      const res = await query(sql, p.values);
      return res.rows.map((r) => toAggregateRow(r, groupBy, Object.keys(q.measures), !!bin));
    },

    async expire(table, rules) {
      await commit.drain();
      return expireQuestdbTable(query, nameOf(table), rules, () => store.waitVisible());
    },

    async waitVisible(timeoutMs = 30_000) {
      await commit.drain();
      const names = Object.values(seriesTables).map(nameOf);
      const target = new Map<string, number>();
      const read = async () =>
        (
          await pool.query(
            `SELECT name, writerTxn, sequencerTxn, suspended, errorMessage FROM wal_tables() WHERE name IN (${names
              .map((_, i) => `$${i + 1}`)
              .join(", ")})`,
            names,
          )
        ).rows as {
          name: string;
          writerTxn: number;
          sequencerTxn: number;
          suspended: boolean;
          errorMessage: string;
        }[];
      for (const r of await read()) target.set(r.name, Number(r.sequencerTxn));
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const rows = await read();
        const suspended = rows.find((r) => r.suspended);
        if (suspended)
          throw new Error(`QuestDB table ${suspended.name} is suspended: ${suspended.errorMessage}`);
        if (rows.every((r) => Number(r.writerTxn) >= (target.get(r.name) ?? 0))) return;
        if (Date.now() > deadline) throw new Error("timed out waiting for QuestDB to apply its WAL");
        await new Promise((r) => setTimeout(r, 20));
      }
    },

    async ping() {
      await query("SELECT 1", []);
    },

    async close() {
      await commit.drain();
      await ilp.close().catch(() => {});
      await pool.end();
    },
  };
  return store;
}
