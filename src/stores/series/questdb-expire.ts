import type { ExpiryRule } from "./types.js";

type Query = (sql: string, params: unknown[]) => Promise<{ rows: Record<string, unknown>[] }>;

const COMPACT = "__compact_";
/** Literal for QuestDB SQL: the only text spliced is ISO timestamps and connection ids, quoted. */
const lit = (v: string) => `'${v.replace(/'/g, "''")}'`;
const inList = (ids: readonly string[]) => `(${ids.map(lit).join(", ")})`;

/**
 * Retention for one QuestDB table. QuestDB cannot delete rows, so expiry works a partition at
 * a time, only on partitions whose newest row is older than a rule's bound:
 * - no connection is kept: the partition is dropped;
 * - some are: the partition is rewritten without the expired rows. The kept rows are copied to
 *   a side table, the partition is dropped and the rows inserted back, then the side table is
 *   dropped. A crash in between leaves the side table, which the next run inserts again (the
 *   table deduplicates on its key, so an insert repeated is harmless) before anything else.
 * Nothing else writes into such old partitions (heartbeat samples older than a day are not
 * written, see src/ingest/heartbeat.ts), so no concurrent write is lost.
 */
export async function expireQuestdbTable(
  query: Query,
  table: string,
  rules: readonly ExpiryRule[],
  waitApplied: () => Promise<void>,
): Promise<number> {
  await recoverCompactions(query, table, waitApplied);
  if (rules.length === 0) return 0;
  const partitions = (
    await query(
      `SELECT name, minTimestamp, maxTimestamp, numRows FROM table_partitions(${lit(table)}) ORDER BY minTimestamp`,
      [],
    )
  ).rows as { name: string; minTimestamp: Date; maxTimestamp: Date; numRows: number }[];
  let removed = 0;
  for (const part of partitions) {
    if (!part.maxTimestamp || Number(part.numRows) === 0) continue;
    const applying = rules.filter((r) => part.maxTimestamp.getTime() < r.before.getTime());
    if (applying.length === 0) continue;
    // A row stays only if every applying rule keeps its connection.
    let kept: string[] = [...(applying[0]?.keep ?? [])];
    for (const r of applying.slice(1)) {
      const next = new Set(r.keep);
      kept = kept.filter((id) => next.has(id));
    }
    if (kept.length === 0) {
      await query(`ALTER TABLE ${table} DROP PARTITION LIST ${lit(part.name)}`, []);
      removed += Number(part.numRows);
      continue;
    }
    const range = `ts >= ${lit(part.minTimestamp.toISOString())} AND ts <= ${lit(part.maxTimestamp.toISOString())}`;
    const expired = Number(
      (
        await query(
          `SELECT count() AS n FROM ${table} WHERE ${range} AND connection_id NOT IN ${inList(kept)}`,
          [],
        )
      ).rows[0]?.n ?? 0,
    );
    if (expired === 0) continue;
    const side = `${table}${COMPACT}${part.name.replace(/[^0-9A-Za-z]/g, "")}`;
    await query(`DROP TABLE IF EXISTS ${side}`, []);
    await query(
      `CREATE TABLE ${side} AS (SELECT * FROM ${table} WHERE ${range} AND connection_id IN ${inList(kept)})`,
      [],
    );
    await query(`ALTER TABLE ${table} DROP PARTITION LIST ${lit(part.name)}`, []);
    await query(`INSERT INTO ${table} SELECT * FROM ${side}`, []);
    await waitApplied();
    await query(`DROP TABLE ${side}`, []);
    removed += expired;
  }
  return removed;
}

/** Inserts back what an interrupted rewrite had set aside, then drops the side table. */
async function recoverCompactions(query: Query, table: string, waitApplied: () => Promise<void>) {
  const leftovers = (
    await query(`SELECT table_name FROM tables() WHERE table_name LIKE ${lit(`${table}${COMPACT}%`)}`, [])
  ).rows as { table_name: string }[];
  for (const { table_name: side } of leftovers) {
    await query(`INSERT INTO ${table} SELECT * FROM ${side}`, []);
    await waitApplied();
    await query(`DROP TABLE ${side}`, []);
  }
}
