import type { ColumnDef, TableDef } from "./tables.js";
import { type Filter, SeriesValidationError } from "./types.js";

/** `at` builds the field name only when there is something to report. */
function checkValue(at: (col: string) => string, col: string, def: ColumnDef, v: unknown): void {
  const field = (): string => at(col);
  if (v === null || v === undefined) {
    if (!def.nullable) throw new SeriesValidationError(field(), "is required");
    return;
  }
  switch (def.type) {
    case "symbol":
    case "string":
      if (typeof v !== "string")
        throw new SeriesValidationError(field(), `must be a string, got ${typeof v}`);
      if (def.type === "symbol" && v.length === 0)
        throw new SeriesValidationError(field(), "must not be empty");
      return;
    case "boolean":
      if (typeof v !== "boolean")
        throw new SeriesValidationError(field(), `must be a boolean, got ${typeof v}`);
      return;
    case "double":
      if (typeof v !== "number" || !Number.isFinite(v))
        throw new SeriesValidationError(field(), `must be a finite number, got ${describe(v)}`);
      return;
    case "long":
      if (typeof v !== "number" || !Number.isSafeInteger(v))
        throw new SeriesValidationError(field(), `must be a whole number, got ${describe(v)}`);
      return;
    case "timestamp":
      if (!(v instanceof Date) || !Number.isFinite(v.getTime()))
        throw new SeriesValidationError(field(), `must be a valid date, got ${describe(v)}`);
      return;
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

export function validateRows(table: TableDef, rows: readonly object[]): void {
  let columns = columnLists.get(table);
  if (!columns) {
    columns = Object.entries(table.columns);
    columnLists.set(table, columns);
  }
  for (let i = 0; i < rows.length; i++) {
    const r = rows[i] as Record<string, unknown>;
    const at = (col: string) => `${table.name}[${i}].${col}`;
    checkValue(at, "ts", TS, r.ts);
    for (const [col, def] of columns) checkValue(at, col, def, r[col]);
    for (const col in r) {
      if (col !== "ts" && !(col in table.columns))
        throw new SeriesValidationError(at(col), "is not a column");
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
