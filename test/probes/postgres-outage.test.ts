import t from "tap";
import { loadConfig } from "../../src/config.js";
import { closeContext, createContext } from "../../src/core/context.js";
import { createKey, createUser } from "../../src/identity/accounts.js";
import { createLogger } from "../../src/lib/logger.js";
import { ProbeWorker } from "../../src/probes/worker.js";
import { startWorkflowA } from "../../src/sim/workflow-a.js";
import { migrate } from "../../src/stores/relational/migrate.js";
import { createPgStore } from "../../src/stores/relational/pg.js";
import { createSqlSeriesStore } from "../../src/stores/series/sql.js";
import { StoreSupervisor } from "../../src/stores/supervisor.js";
import { freshDatabaseUrl, requireBackend } from "../helpers/backends.js";
import { cuttableProxy } from "../helpers/proxy.js";

t.test("Postgres briefly unreachable: checks pause and resume, no false incident", async (t) => {
  if (!(await requireBackend(t, "postgres"))) return;
  const direct = new URL(await freshDatabaseUrl(t));
  const proxy = await cuttableProxy(direct);
  t.teardown(() => proxy.close());
  const viaProxy = new URL(direct);
  viaProxy.port = String(proxy.port);
  const db = createPgStore({ connectionString: viaProxy.toString(), max: 4 });
  t.teardown(() => db.close());
  await migrate(db);
  const config = loadConfig({
    LOG_LEVEL: "silent",
    VIGIL_SECRET: "outage-secret-outage-secret-outage-secret",
  });
  const log = createLogger("silent");
  const ctx = createContext(
    config,
    log,
    StoreSupervisor.ready({ db, series: createSqlSeriesStore(db) }, log, config),
  );
  t.teardown(() => closeContext(ctx));
  const sim = await startWorkflowA();
  t.teardown(() => sim.close());

  const user = await createUser(db, { email: "o@x.example", plan: "enterprise" });
  await createKey(db, { user: user.id, permissions: ["connections:read"] });
  await db.query(
    `INSERT INTO connections (id, user_id, service_type, service_name, status, base_url, api_key_enc, api_key_length)
     VALUES ('c1', $1, 'workflow_a', 'n8n', 'active', $2, $3, 12)`,
    [user.id, sim.url, ctx.credentials.encrypt("sim-api-key")],
  );
  const worker = new ProbeWorker(ctx, { timeoutMs: 500 });
  t.teardown(() => worker.stop());
  t.equal(await worker.tick(), 1);
  await worker.idle();

  proxy.cut();
  for (let i = 0; i < 5; i++) {
    t.equal(await worker.tick(), 0, "nothing claimed while Postgres is unreachable, and no crash");
    await new Promise((r) => setTimeout(r, 50));
  }
  proxy.restore();
  await db.query("UPDATE connections SET next_check_at = now()");
  let claimed = 0;
  for (let i = 0; i < 20 && claimed === 0; i++) {
    claimed = await worker.tick();
    await new Promise((r) => setTimeout(r, 100));
  }
  await worker.idle();
  t.equal(claimed, 1, "checks resume when it is back");
  const incidents = await db.query("SELECT count(*) AS n FROM incidents");
  t.equal(incidents.rows[0]?.n, 0, "no incident from the outage");
  const state = await db.query<{ status: string; consecutive_failures: number }>(
    "SELECT status, consecutive_failures FROM connections",
  );
  t.same(state.rows[0], { status: "active", consecutive_failures: 0 });
});
