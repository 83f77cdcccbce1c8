import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import t, { type Test } from "tap";
import { DataDirLockedError } from "../../src/stores/relational/dir-lock.js";
import {
  type Migration,
  MigrationError,
  migrate,
  readMigrations,
} from "../../src/stores/relational/migrate.js";
import { createPgStore } from "../../src/stores/relational/pg.js";
import { createPgliteStore } from "../../src/stores/relational/pglite.js";
import type { RelationalStore } from "../../src/stores/relational/types.js";
import { freshDatabaseUrl, requireBackend } from "../helpers/backends.js";

const m = (version: string, sql: string): Migration => ({ version, file: `sql/test/${version}.sql`, sql });

async function backendsUnderTest(t: Test): Promise<[string, () => Promise<RelationalStore>][]> {
  const out: [string, () => Promise<RelationalStore>][] = [["pglite", () => createPgliteStore()]];
  if (await requireBackend(t, "postgres")) {
    const url = await freshDatabaseUrl(t);
    out.push(["postgres", async () => createPgStore({ connectionString: url })]);
  }
  return out;
}

t.test("migration files are numbered and unique", async (t) => {
  const all = readMigrations();
  t.ok(all.length > 0);
  const numbers = all.map((x) => x.version.split("_")[0]);
  t.equal(new Set(numbers).size, numbers.length, "no two files share a number");
  t.same(
    all.map((x) => x.version),
    [...all.map((x) => x.version)].sort(),
    "applied in file-name order",
  );
});

t.test("migrations: applied in order, recorded, safe to re-run, a failure names the file", async (t) => {
  for (const [name, open] of await backendsUnderTest(t)) {
    await t.test(name, async (t) => {
      const db = await open();
      t.teardown(() => db.close());
      const list = [
        m("001_a", "CREATE TABLE a (id int)"),
        m("002_b", "CREATE TABLE b (id int); INSERT INTO b VALUES (1)"),
      ];
      t.same(await migrate(db, { migrations: list }), ["001_a", "002_b"]);
      t.same(await migrate(db, { migrations: list }), [], "second run applies nothing");
      const recorded = await db.query<{ version: string }>(
        "SELECT version FROM schema_migrations ORDER BY version",
      );
      t.same(
        recorded.rows.map((r) => r.version),
        ["001_a", "002_b"],
      );

      const broken = [...list, m("003_broken", "CREATE TABLE c (id int); SELECT no_such_column FROM a")];
      const err = await migrate(db, { migrations: broken }).catch((e: unknown) => e);
      t.type(err, MigrationError);
      t.match((err as Error).message, /003_broken\.sql failed: .*no_such_column/);
      const c = await db.query("SELECT to_regclass('c') AS c");
      t.equal(c.rows[0]?.c, null, "the failing migration's earlier statements were rolled back");
      const after = await db.query(
        "SELECT count(*) AS n FROM schema_migrations WHERE version = '003_broken'",
      );
      t.equal(after.rows[0]?.n, 0, "and it is not recorded");
    });
  }
});

t.test("two processes migrating at once apply each migration once", async (t) => {
  if (!(await requireBackend(t, "postgres"))) return;
  const url = await freshDatabaseUrl(t);
  const a = createPgStore({ connectionString: url });
  const b = createPgStore({ connectionString: url });
  t.teardown(async () => {
    await a.close();
    await b.close();
  });
  // A slow, non-idempotent migration: running it twice would fail on the second CREATE TABLE.
  const list = [
    m("001_slow", "SELECT pg_sleep(0.3); CREATE TABLE once_only (id int)"),
    m("002_next", "CREATE TABLE next_one (id int)"),
  ];
  const [ra, rb] = await Promise.all([migrate(a, { migrations: list }), migrate(b, { migrations: list })]);
  t.same([...ra, ...rb].sort(), ["001_slow", "002_next"], "each applied by exactly one of them");
});

t.test("the real migrations apply on PGlite and Postgres", async (t) => {
  for (const [name, open] of await backendsUnderTest(t)) {
    const db = await open();
    t.teardown(() => db.close());
    const applied = await migrate(db);
    t.equal(applied.length, readMigrations().length, `${name}: all applied`);
    t.same(await migrate(db), [], `${name}: re-run is a no-op`);
  }
});

t.test("PGlite data folder: one process at a time, data persists, stale lock taken over", async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "vigil-lock-"));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const first = await createPgliteStore({ dataDir: dir });
  await first.exec("CREATE TABLE kept (v text); INSERT INTO kept VALUES ('hello')");
  const second = await createPgliteStore({ dataDir: dir }).catch((e: unknown) => e);
  t.type(second, DataDirLockedError, "a second opener fails");
  t.match((second as Error).message, new RegExp(`in use by another Vigil process \\(pid ${process.pid}\\)`));
  await first.close();
  t.notOk(fs.existsSync(path.join(dir, "vigil.lock")), "lock released on close");

  // a lock left by a process that no longer exists
  fs.writeFileSync(path.join(dir, "vigil.lock"), "999999999\n");
  const reopened = await createPgliteStore({ dataDir: dir });
  const rows = await reopened.query<{ v: string }>("SELECT v FROM kept");
  t.same(rows.rows, [{ v: "hello" }], "data persisted across opens");
  await reopened.close();
});
