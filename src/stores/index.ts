import type { Config } from "../config.js";
import { migrate } from "./relational/migrate.js";
import { createPgStore } from "./relational/pg.js";
import { createPgliteStore } from "./relational/pglite.js";
import type { RelationalStore } from "./relational/types.js";
import { applyQuestdbSchema, createQuestdbSeriesStore, questdbPool } from "./series/questdb.js";
import { createSqlSeriesStore } from "./series/sql.js";
import type { SeriesStore } from "./series/types.js";

export interface Stores {
  db: RelationalStore;
  series: SeriesStore;
}

export async function openRelational(
  config: Config,
  onError?: (err: Error) => void,
): Promise<RelationalStore> {
  if (config.databaseUrl) return createPgStore({ connectionString: config.databaseUrl, onError });
  return createPgliteStore({ dataDir: config.dataDir });
}

/** Applies the QuestDB DDL (idempotent) and opens the QuestDB series store. */
export async function openQuestdb(
  questdb: NonNullable<Config["questdb"]>,
  tablePrefix = "",
): Promise<SeriesStore> {
  const pool = questdbPool(questdb.pgUrl, 1);
  try {
    await applyQuestdbSchema(pool, tablePrefix);
  } finally {
    await pool.end();
  }
  return createQuestdbSeriesStore({ httpUrl: questdb.httpUrl, pgUrl: questdb.pgUrl, tablePrefix });
}

export function openSeries(config: Config, db: RelationalStore): Promise<SeriesStore> {
  return config.questdb ? openQuestdb(config.questdb) : Promise.resolve(createSqlSeriesStore(db));
}

/** `vigil migrate`: relational migrations, then the QuestDB DDL when QuestDB is configured. */
export async function migrateAll(
  config: Config,
  log: (msg: string) => void,
): Promise<{ applied: string[]; questdb: boolean }> {
  const db = await openRelational(config);
  try {
    const applied = await migrate(db, { onApplied: (m) => log(`applied ${m.version}`) });
    if (config.questdb) {
      const series = await openQuestdb(config.questdb);
      await series.close();
      log(`QuestDB schema applied at ${config.questdb.httpUrl}`);
    }
    return { applied, questdb: Boolean(config.questdb) };
  } finally {
    await db.close();
  }
}
