import type { ColumnDef, TableDef } from "./tables.js";
import { type Filter, SeriesValidationError } from "./types.js";

/** What is wrong with a value for a column, or null when it fits (no allocation when it does). */
function problem(def: ColumnDef, v: unknown): string | null {
  if (v === null || v === undefined) return def.nullable ? null : "is required";
  switch (def.type) {
    case "symbol":
    case "string":
      if (typeof v !== "string") return `must be a string, got ${typeof v}`;
      if (def.type === "symbol" && v.length === 0) return "must not be empty";
      return null;
    case "boolean":
      return typeof v === "boolean" ? null : `must be a boolean, got ${typeof v}`;
    case "double":
      return typeof v === "number" && Number.isFinite(v)
        ? null
        : `must be a finite number, got ${describe(v)}`;
    case "long":
      return typeof v === "number" && Number.isSafeInteger(v)
        ? null
        : `must be a whole number, got ${describe(v)}`;
    case "timestamp":
      return v instanceof Date && Number.isFinite(v.getTime())
        ? null
        : `must be a valid date, got ${describe(v)}`;
  }
}

function describe(v: unknown): string {
  if (typeof v === "number") return String(v);
  if (v instanceof Date) return "an invalid date";
  return typeof v === "string" ? `the string ${JSON.stringify(v.slice(0, 40))}` : typeof v;
}

/**
 * Checks every row against the table before anything is written, so a bad row rejects the
 * whole call and nothing partial is stored.
 */
const TS: ColumnDef = { type: "timestamp" };
const columnLists = new WeakMap<TableDef, [string, ColumnDef][]>();

const at = (table: TableDef, i: number, col: string) => `${table.name}[${i}].${col}`;

export function validateRows(table: TableDef, rows: readonly object[]): void {
  let columns = columnLists.get(table);
  if (!columns) {
    columns = Object.entries(table.columns);
    columnLists.set(table, columns);
  }
  for (let i = 0; i < rows.length; i++) {
    const r = rows[i] as Record<string, unknown>;
    const p = problem(TS, r.ts);
    if (p) throw new SeriesValidationError(at(table, i, "ts"), p);
    for (const [col, def] of columns) {
      const q = problem(def, r[col]);
      if (q) throw new SeriesValidationError(at(table, i, col), q);
    }
    for (const col in r) {
      if (col !== "ts" && !(col in table.columns))
        throw new SeriesValidationError(at(table, i, col), "is not a column");
    }
  }
}

export function checkColumn(table: TableDef, column: string, what = "column"): ColumnDef {
  if (column === "ts") return { type: "timestamp" };
  const def = table.columns[column];
  if (!def) throw new SeriesValidationError(column, `is not a ${what} of ${table.name}`);
  return def;
}

export function checkFilters(table: TableDef, where: readonly Filter[] = []): void {
  for (const f of where) {
    checkColumn(table, f.column);
    if (f.op === "in" && f.value.length === 0) throw new SeriesValidationError(f.column, "IN list is empty");
    if (f.op === "inSince" && (f.groups.length === 0 || f.groups.some((g) => g.values.length === 0)))
      throw new SeriesValidationError(f.column, "IN list is empty");
  }
}

/** Keeps the last row for each key: one statement cannot upsert the same key twice. */
export function lastPerKey<R extends { ts: Date }>(table: TableDef, rows: readonly R[]): R[] {
  const byKey = new Map<string, R>();
  for (const row of rows) {
    const r = row as unknown as Record<string, unknown>;
    const k = [row.ts.getTime(), ...table.key.map((c) => String(r[c]))].join("\u0000");
    byKey.delete(k);
    byKey.set(k, row);
  }
  return [...byKey.values()];
}
