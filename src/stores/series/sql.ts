import type { Queryable, RelationalStore } from "../relational/types.js";
import { seriesCommitObserver, watchBacklog } from "../../lib/metrics.js";
import { type SpanOptions, traced } from "../../lib/tracing.js";
import { GroupCommit } from "./group-commit.js";
import { groupCommitWrites, type WriteItem } from "./writes.js";
import {
  binSql,
  checkGroupBy,
  measureSql,
  orderNewestFirst,
  Params,
  toNumberOrNull,
  whereClauses,
} from "./sql-builders.js";
import type { ColumnType, RowOf, SeriesTable, TableDef } from "./tables.js";
import {
  type AggregateQuery,
  type AggregateRow,
  type Page,
  type PageQuery,
  type SeriesStore,
  SeriesUnavailableError,
} from "./types.js";
import { lastPerKey } from "./validate.js";

const pgType: Record<ColumnType, string> = {
  symbol: "text",
  string: "text",
  boolean: "boolean",
  double: "double precision",
  long: "bigint",
  timestamp: "timestamptz",
};

const truncUnit = { minute: "minute", hour: "hour", day: "day", week: "week", month: "month" } as const;

/**
 * One upsert per table: the rows travel as one array per column and are expanded with
 * unnest(), so a batch of any size is a single statement with a fixed number of parameters.
 */
function upsertSql(table: TableDef): string {
  const cols = ["ts", ...Object.keys(table.columns)];
  const types = ["timestamptz", ...Object.values(table.columns).map((c) => pgType[c.type])];
  const key = ["ts", ...table.key];
  const updates = cols.filter((c) => !key.includes(c)).map((c) => `${c} = EXCLUDED.${c}`);
  return (
    `INSERT INTO ${table.name} (${cols.join(", ")})\n` +
    `SELECT * FROM unnest(${types.map((t, i) => `$${i + 1}::${t}[]`).join(", ")})\n` +
    `ON CONFLICT (${key.join(", ")}) DO ${updates.length ? `UPDATE SET ${updates.join(", ")}` : "NOTHING"}`
  );
}

function isDataError(err: unknown): boolean {
  const code = (err as { code?: unknown }).code;
  // SQLSTATE classes 22 (data exception) and 23 (integrity constraint violation).
  return typeof code === "string" && (code.startsWith("22") || code.startsWith("23"));
}

/**
 * The span of one group commit (`vigil.series.commit`, both stores): a trace of its own, since
 * one commit carries the rows of many requests; the store's kind and the rows it wrote.
 */
export const commitSpan = (store: string): SpanOptions<[WriteItem[]], void> => ({
  root: true,
  attributes: (items) => ({ "vigil.series.store": store, "vigil.series.rows": items.length }),
});

export function createSqlSeriesStore(db: RelationalStore): SeriesStore {
  const sqlByTable = new Map<string, string>();
  const commit = new GroupCommit<WriteItem>({
    maxInFlight: db.kind === "pglite" ? 1 : 2,
    isDataError,
    observe: seriesCommitObserver(db.kind),
    flush: traced("vigil.series.commit", commitSpan(db.kind), async (items) => {
      const byTable = new Map<SeriesTable, WriteItem["row"][]>();
      for (const it of items) {
        const list = byTable.get(it.table) ?? [];
        list.push(it.row);
        byTable.set(it.table, list);
      }
      const upsert = async (tx: Queryable, table: SeriesTable, rows: WriteItem["row"][]) => {
        const unique = lastPerKey(table, rows);
        const cols = ["ts", ...Object.keys(table.columns)];
        const arrays = cols.map((c) => unique.map((r) => r[c] ?? null));
        let sql = sqlByTable.get(table.name);
        if (!sql) {
          sql = upsertSql(table);
          sqlByTable.set(table.name, sql);
        }
        await tx.query(sql, arrays, { prepare: `vigil_series_${table.name}` });
      };
      try {
        // One table is one statement, atomic by itself: BEGIN and COMMIT would double its round
        // trips (a probe process writes samples alone, several times a second).
        const [only, ...more] = byTable;
        if (only && more.length === 0) await upsert(db, only[0], only[1]);
        else
          await db.transaction(async (tx) => {
            for (const [table, rows] of byTable) await upsert(tx, table, rows);
          });
      } catch (err) {
        if (isDataError(err)) throw err;
        throw new SeriesUnavailableError("sql", `series write failed: ${(err as Error).message}`, {
          cause: err,
        });
      }
    }),
  });
  watchBacklog(db.kind, commit);

  const tsParam = (d: Date) => d.toISOString();

  return {
    kind: "sql",
    ...groupCommitWrites(commit),

    async count(table, q) {
      const p = new Params();
      const conds = whereClauses(table, q, p, tsParam);
      const res = await db.query<{ n: number }>(
        `SELECT count(*) AS n FROM ${table.name}${conds.length ? ` WHERE ${conds.join(" AND ")}` : ""}`,
        p.values,
      );
      return Number(res.rows[0]?.n ?? 0);
    },

    async page<T extends SeriesTable>(table: T, q: PageQuery): Promise<Page<RowOf<T>>> {
      const p = new Params();
      const conds = whereClauses(table, q, p, tsParam);
      if (q.after) {
        // a row-value comparison, which PostgreSQL answers from the (ts, key) primary key
        // index; the nested OR form QuestDB needs made a deep page scan the table
        if (q.after.key.length !== table.key.length) throw new Error("cursor key does not match the table");
        const vals = [tsParam(q.after.ts), ...q.after.key].map((v) => p.add(v));
        conds.push(`(ts, ${table.key.join(", ")}) < (${vals.join(", ")})`);
      }
      const cols = ["ts", ...Object.keys(table.columns)];
      const sql =
        `SELECT ${cols.join(", ")} FROM ${table.name}` +
        (conds.length ? ` WHERE ${conds.join(" AND ")}` : "") +
        ` ORDER BY ${orderNewestFirst(table)} LIMIT ${p.add(q.limit + 1)}` +
        (q.offset ? ` OFFSET ${p.add(q.offset)}` : "");
      const res = await db.query(sql, p.values);
      return toPage<T>(table, res.rows, q.limit);
    },

    async aggregate(table, q: AggregateQuery): Promise<AggregateRow[]> {
      const groupBy = checkGroupBy(table, q);
      const p = new Params();
      const conds = whereClauses(table, q, p, tsParam);
      const bucket =
        q.bucket === "all"
          ? "NULL::timestamptz"
          : q.bucket === "five_minutes"
            ? "date_bin('5 minutes', ts, TIMESTAMPTZ '2000-01-01 00:00:00+00')"
            : `date_trunc('${truncUnit[q.bucket]}', ts, 'UTC')`;
      const bin = binSql(table, q);
      const keys = [...(q.bucket === "all" ? [] : [bucket]), ...groupBy, ...(bin ? [bin] : [])];
      const measures = Object.entries(q.measures).map(([alias, m]) => measureSql(table, alias, m, "sql"));
      const sql =
        `SELECT ${bucket} AS bucket${groupBy.map((g) => `, ${g}`).join("")}${bin ? `, ${bin}::bigint AS bin` : ""}, ${measures.join(", ")}` +
        ` FROM ${table.name}` +
        (conds.length ? ` WHERE ${conds.join(" AND ")}` : "") +
        (keys.length ? ` GROUP BY ${keys.join(", ")}` : "") +
        (q.bucket === "all"
          ? groupBy.length
            ? ` ORDER BY ${groupBy.join(", ")}`
            : ""
          : ` ORDER BY bucket${groupBy.map((g) => `, ${g}`).join("")}`);
      const res = await db.query(sql, p.values);
      return res.rows.map((r) => toAggregateRow(r, groupBy, Object.keys(q.measures), !!bin));
    },

    async expire(table, rules) {
      let removed = 0;
      for (const rule of rules) {
        const keep = rule.keep.length ? " AND NOT (connection_id = ANY($2::text[]))" : "";
        const res = await db.query(
          `DELETE FROM ${table.name} WHERE ts < $1${keep}`,
          rule.keep.length ? [rule.before.toISOString(), [...rule.keep]] : [rule.before.toISOString()],
        );
        removed += res.rowCount ?? 0;
      }
      return removed;
    },

    async waitVisible() {
      // A committed SQL transaction is visible at once.
      await commit.drain();
    },
    async ping() {
      await db.query("SELECT 1 FROM availability_samples LIMIT 1");
    },
    async close() {
      await commit.drain();
    },
  };
}

export function toPage<T extends SeriesTable>(
  table: T,
  rows: Record<string, unknown>[],
  limit: number,
): Page<RowOf<T>> {
  const more = rows.length > limit;
  const page = more ? rows.slice(0, limit) : rows;
  const last = page[page.length - 1];
  return {
    rows: page.map((r) => normalizeRow(table, r)) as RowOf<T>[],
    next: more && last ? { ts: last.ts as Date, key: table.key.map((k) => String(last[k])) } : null,
  };
}

/** Same JS types from every driver: numbers as numbers, absent values as null (booleans false). */
export function normalizeRow(table: TableDef, r: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ts: r.ts };
  for (const [col, def] of Object.entries(table.columns)) {
    const v = r[col];
    // QuestDB has no null boolean (a row from before a boolean column reads false): false everywhere
    if (v === undefined || v === null) out[col] = def.type === "boolean" ? false : null;
    else if (def.type === "double" || def.type === "long") out[col] = toNumberOrNull(v);
    else out[col] = v;
  }
  return out;
}

export function toAggregateRow(
  r: Record<string, unknown>,
  groupBy: string[],
  measures: string[],
  bin = false,
): AggregateRow {
  const out: AggregateRow = { bucket: (r.bucket as Date | undefined) ?? null };
  for (const g of groupBy) out[g] = (r[g] as string | null) ?? null;
  if (bin) out.bin = toNumberOrNull(r.bin);
  for (const m of measures) out[m] = toNumberOrNull(r[m]);
  return out;
}
