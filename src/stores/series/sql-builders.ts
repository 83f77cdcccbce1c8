import type { TableDef } from "./tables.js";
import type { AggregateQuery, Filter, Measure, PageQuery } from "./types.js";
import { checkColumn, checkFilters } from "./validate.js";

/**
 * SQL text shared by both backends. Column names come only from table definitions (checked
 * by `checkColumn`), values only as bind parameters, so nothing a caller sends is spliced
 * into a statement.
 */
export class Params {
  readonly values: unknown[] = [];
  add(v: unknown): string {
    this.values.push(v);
    return `$${this.values.length}`;
  }
}

export function whereClauses(
  table: TableDef,
  q: Pick<PageQuery, "where" | "since" | "until">,
  p: Params,
  ts: (d: Date) => unknown,
): string[] {
  checkFilters(table, q.where);
  const out: string[] = [];
  for (const f of q.where ?? []) out.push(filterSql(f, p, ts));
  if (q.since) out.push(`ts >= ${p.add(ts(q.since))}`);
  if (q.until) out.push(`ts < ${p.add(ts(q.until))}`);
  return out;
}

function filterSql(f: Filter, p: Params, ts: (d: Date) => unknown): string {
  switch (f.op) {
    case "eq":
      return `${f.column} = ${p.add(f.value)}`;
    case "ne":
      return `${f.column} != ${p.add(f.value)}`;
    case "in":
      return `${f.column} IN (${f.value.map((v) => p.add(v)).join(", ")})`;
    case "inSince":
      return `(${f.groups
        .map(
          (g) =>
            `(${f.column} IN (${g.values.map((v) => p.add(v)).join(", ")}) AND ts >= ${p.add(ts(g.since))})`,
        )
        .join(" OR ")})`;
  }
}

/**
 * Keyset condition "strictly after `after` in newest-first order", written out as nested
 * OR/AND (QuestDB has no row-value comparison): ts < t OR (ts = t AND (k1 < v1 OR (k1 = v1 AND …))).
 */
export function afterClause(
  table: TableDef,
  after: NonNullable<PageQuery["after"]>,
  p: Params,
  ts: (d: Date) => unknown,
): string {
  const cols = ["ts", ...table.key];
  if (after.key.length !== table.key.length) throw new Error("cursor key does not match the table");
  const vals: unknown[] = [ts(after.ts), ...after.key];
  const build = (i: number): string => {
    const col = cols[i] as string;
    const ph = p.add(vals[i]);
    if (i === cols.length - 1) return `${col} < ${ph}`;
    const eqPh = p.add(vals[i]);
    return `(${col} < ${ph} OR (${col} = ${eqPh} AND ${build(i + 1)}))`;
  };
  return build(0);
}

export function orderNewestFirst(table: TableDef): string {
  return ["ts DESC", ...table.key.map((k) => `${k} DESC`)].join(", ");
}

export function measureSql(table: TableDef, alias: string, m: Measure, dialect: "sql" | "questdb"): string {
  if (!/^[a-z_][a-z0-9_]*$/.test(alias)) throw new Error(`bad measure alias ${alias}`);
  // rows where the `unless` column is true are left out: `CASE WHEN unless THEN NULL ELSE x END`
  // (a null boolean is not true, so it counts, as QuestDB's false does)
  let unless: string | null = null;
  if ("unless" in m && m.unless !== undefined) {
    const def = checkColumn(table, m.unless);
    if (def.type !== "boolean") throw new Error(`${m.unless} is not boolean`);
    unless = m.unless;
  }
  const unlessOr = (expr: string, instead = "NULL") =>
    unless === null ? expr : `CASE WHEN ${unless} THEN ${instead} ELSE ${expr} END`;
  switch (m.fn) {
    case "count":
      if (m.column === undefined)
        return unless === null ? `count(*) AS ${alias}` : `sum(${unlessOr("1", "0")}) AS ${alias}`;
      checkColumn(table, m.column);
      return unless === null
        ? `count(${m.column}) AS ${alias}`
        : `sum(CASE WHEN ${unless} THEN 0 WHEN ${m.column} IS NULL THEN 0 ELSE 1 END) AS ${alias}`;
    case "countTrue": {
      const def = checkColumn(table, m.column);
      if (def.type !== "boolean") throw new Error(`${m.column} is not boolean`);
      return `sum(${unlessOr(`CASE WHEN ${m.column} THEN 1 ELSE 0 END`, "0")}) AS ${alias}`;
    }
    case "percentile": {
      const def = checkColumn(table, m.column);
      if (def.type !== "double" && def.type !== "long") throw new Error(`${m.column} is not numeric`);
      if (!(m.p > 0 && m.p < 1)) throw new Error(`percentile ${m.p} is not between 0 and 1`);
      // QuestDB: the store ranks values with window functions instead (questdb.ts withPercentiles)
      return dialect === "questdb"
        ? `NULL AS ${alias}`
        : `percentile_disc(${m.p}) WITHIN GROUP (ORDER BY ${m.column}) AS ${alias}`;
    }
    default: {
      const def = checkColumn(table, m.column);
      if (def.type !== "double" && def.type !== "long") throw new Error(`${m.column} is not numeric`);
      return `${m.fn}(${unlessOr(m.column)}) AS ${alias}`;
    }
  }
}

export function checkGroupBy(table: TableDef, q: AggregateQuery): string[] {
  const groupBy = q.groupBy ?? [];
  for (const g of groupBy) {
    const def = checkColumn(table, g);
    if (def.type !== "symbol" && def.type !== "string" && def.type !== "boolean" && def.type !== "long")
      throw new Error(`cannot group by ${g}`);
  }
  return groupBy;
}

/**
 * The `bin` expression of a query (types.ts LogBin), or null: the natural logarithm times a
 * constant written out in full, so both backends multiply by the very same double.
 */
export function binSql(table: TableDef, q: AggregateQuery): string | null {
  if (!q.bin) return null;
  const def = checkColumn(table, q.bin.column);
  if (def.type !== "double" && def.type !== "long") throw new Error(`${q.bin.column} is not numeric`);
  const k = q.bin.perDoubling / Math.LN2;
  if (!(Number.isFinite(k) && k > 0 && k <= 1000)) throw new Error(`bad bin resolution ${q.bin.perDoubling}`);
  if (Object.values(q.measures).some((m) => m.fn === "percentile"))
    throw new Error("percentiles cannot be binned");
  // the epsilon keeps a value whose logarithm lands on a bin's edge (2^j − 1) in the same bin
  // whichever last bit the backend's ln gives
  return `floor(ln(${q.bin.column} + 1) * ${k.toPrecision(17)} + 1e-9)`;
}

/** Numbers from either driver (a count may arrive as a string) as numbers; null stays null. */
export function toNumberOrNull(v: unknown): number | null {
  if (v === null || v === undefined) return null;
  const n = typeof v === "number" ? v : Number(v);
  return Number.isFinite(n) ? n : null;
}
