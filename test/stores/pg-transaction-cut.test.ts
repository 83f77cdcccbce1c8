import t from "tap";
import { createPgStore } from "../../src/stores/relational/pg.js";
import { requireBackend } from "../helpers/backends.js";
import { pausableProxy } from "../helpers/proxy.js";

/**
 * PostgreSQL going away while a transaction holds a connection (a restart, a cut network): the
 * transaction's next statement rejects and the process goes on. pg-pool listens for a client's
 * errors only while it is idle in the pool, so without a listener of the transaction's own the
 * connection's error ended the whole process (found by `npm run bench -- status-page`, which cuts
 * PostgreSQL under a running Vigil).
 */
t.test("a connection cut inside a transaction rejects it; the process survives", async (t) => {
  if (!(await requireBackend(t, "postgres"))) return;
  const target = new URL(process.env.TEST_DATABASE_URL ?? "");
  const proxy = await pausableProxy(`http://${target.hostname}:${target.port || 5432}`);
  const via = new URL(target.href);
  via.port = new URL(proxy.url).port;
  via.hostname = "127.0.0.1";
  const db = createPgStore({ connectionString: via.href, max: 2 });
  t.teardown(() => db.close().catch(() => {}));

  const outcome = await db
    .transaction(async (tx) => {
      await tx.query("SELECT 1");
      await proxy.close(); // every connection dropped between two statements
      await new Promise((r) => setTimeout(r, 200)); // the socket's error arrives while no statement runs
      await tx.query("SELECT 2");
      return "committed";
    })
    .then(
      (v) => v,
      (err: unknown) => `rejected: ${(err as Error).message}`,
    );
  t.match(outcome, /^rejected/, "the transaction rejects");
  await new Promise((r) => setTimeout(r, 200));
  t.pass("the process is still running");
});
