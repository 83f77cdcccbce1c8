import t from "tap";
import { applyQuestdbSchema, type QuestdbSeriesStore, questdbPool } from "../../src/stores/series/questdb.js";
import { freshSeries, requireBackend, TEST_QUESTDB_PG_URL } from "../helpers/backends.js";

/**
 * The QuestDB DDL runs at every start of every node, so applying it to a schema that already has
 * every table and column must succeed: a restart after a column was added (sql/questdb/003) once
 * failed here, because QuestDB refuses a no-op ADD COLUMN IF NOT EXISTS on WAL tables.
 */
t.test("the QuestDB schema applies again over itself (a restart)", async (t) => {
  if (!(await requireBackend(t, "questdb"))) return;
  const series = (await freshSeries(t, "questdb")) as QuestdbSeriesStore;
  const pool = questdbPool(TEST_QUESTDB_PG_URL as string, 1);
  t.teardown(() => pool.end());
  await t.resolves(applyQuestdbSchema(pool, series.tablePrefix), "second start");
  await t.resolves(applyQuestdbSchema(pool, series.tablePrefix), "third start");
  const cols = await pool.query<{ column: string }>(
    `SELECT "column" FROM table_columns('${series.tablePrefix}executions')`,
  );
  const names = cols.rows.map((r) => r.column);
  t.ok(
    names.includes("error_node") && names.includes("last_node"),
    `the added columns are there: ${names.join(", ")}`,
  );
});
