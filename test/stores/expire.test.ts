import t from "tap";
import type { QuestdbSeriesStore } from "../../src/stores/series/questdb.js";
import { questdbPool } from "../../src/stores/series/questdb.js";
import { availabilitySamples } from "../../src/stores/series/tables.js";
import { type BackendName, freshSeries, requireBackend, TEST_QUESTDB_PG_URL } from "../helpers/backends.js";

const DAY = 86_400_000;
const now = Date.now();
const sample = (connection_id: string, ts: number) => ({
  ts: new Date(ts),
  connection_id,
  available: true,
  synthetic: false,
  source: "probe",
});
const count = (s: Awaited<ReturnType<typeof freshSeries>>, id: string) =>
  s.count(availabilitySamples, { where: [{ column: "connection_id", op: "eq", value: id }] });

for (const backend of ["pglite", "postgres", "questdb"] as BackendName[]) {
  t.test(`expire on ${backend}: rows past a rule's bound go unless kept`, async (t) => {
    if (!(await requireBackend(t, backend))) return;
    const s = await freshSeries(t, backend);
    const old = Math.floor((now - 10 * DAY) / DAY) * DAY;
    const recent = now - DAY;
    for (const id of ["keep", "drop"])
      await s.append(availabilitySamples, [
        sample(id, old + 1000),
        sample(id, old + 2000),
        sample(id, recent),
      ]);
    await s.waitVisible();
    const removed = await s.expire(availabilitySamples, [
      { before: new Date(now - 7 * DAY), keep: ["keep"] },
    ]);
    await s.waitVisible();
    t.equal(removed, 2, "two expired rows removed");
    t.equal(await count(s, "keep"), 3, "a kept connection keeps its old rows");
    t.equal(await count(s, "drop"), 1, "the other keeps only its recent row");
    t.equal(
      await s.expire(availabilitySamples, [{ before: new Date(now - 7 * DAY), keep: ["keep"] }]),
      0,
      "a second run removes nothing",
    );
    t.equal(await s.expire(availabilitySamples, [{ before: new Date(now - 7 * DAY), keep: [] }]), 2);
    await s.waitVisible();
    t.equal(await count(s, "keep"), 1, "with nothing kept, the old partition goes");
  });
}

t.test(
  "QuestDB: a rewrite interrupted after dropping the partition is completed by the next run",
  async (t) => {
    if (!(await requireBackend(t, "questdb"))) return;
    const s = (await freshSeries(t, "questdb")) as QuestdbSeriesStore;
    const pool = questdbPool(TEST_QUESTDB_PG_URL as string, 1);
    t.teardown(() => pool.end());
    const table = `${s.tablePrefix}availability_samples`;
    const old = Math.floor((now - 10 * DAY) / DAY) * DAY;
    await s.append(availabilitySamples, [
      sample("keep", old + 1000),
      sample("keep", old + 2000),
      sample("drop", old),
    ]);
    await s.waitVisible();
    // what a run that died between "drop the partition" and "write the kept rows back" leaves behind
    const day = new Date(old).toISOString().slice(0, 10);
    await pool.query(
      `CREATE TABLE ${table}__compact_${day.replace(/-/g, "")} AS (SELECT * FROM ${table} WHERE connection_id = 'keep')`,
    );
    await pool.query(`ALTER TABLE ${table} DROP PARTITION LIST '${day}'`);
    await s.waitVisible();
    t.equal(await count(s, "keep"), 0, "the kept rows are only in the side table now");

    await s.expire(availabilitySamples, []);
    await s.waitVisible();
    t.equal(await count(s, "keep"), 2, "the next run writes them back");
    const left = await pool.query("SELECT table_name FROM tables() WHERE table_name LIKE $1", [
      `${table}__compact_%`,
    ]);
    t.equal(left.rows.length, 0, "and drops the side table");
  },
);
