import pg from "pg";
import t from "tap";
import { startWorkflowA } from "../../src/sim/workflow-a.js";
import { freshDatabaseUrl, requireBackend } from "../helpers/backends.js";
import { serveOnFreePort, spawnVigil, runAdmin } from "../helpers/process.js";

/**
 * The probe and jobs roles in two processes each, on one PostgreSQL: a connection is checked
 * once per slot however many probe processes run, and a cluster job runs once per period
 * however many jobs processes run. (probe-workers.test.ts covers a probe process that dies
 * holding leases.)
 */

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

t.test("two probe processes from the start: every slot of a connection is checked once", async (t) => {
  if (!(await requireBackend(t, "postgres"))) return;
  const env = {
    DATABASE_URL: await freshDatabaseUrl(t),
    VIGIL_SECRET: "background-roles-secret-background-roles",
    PROBE_LEASE_SECONDS: "5",
    LOG_LEVEL: "info",
  };
  const db = new pg.Client({ connectionString: env.DATABASE_URL });
  await db.connect();
  t.teardown(() => db.end());
  const sim = await startWorkflowA();
  t.teardown(() => sim.close());
  const admin = (...args: string[]) => runAdmin(t, env, ...args);
  const api = await serveOnFreePort(t, env, ["--roles", "api"]);
  await api.waitFor(/series store ready/, 60_000);
  const user = await admin("create-user", "--email", "slots@x.example", "--plan", "enterprise");
  const { key } = await admin("create-key", "--user", user.id as string);
  const INTERVAL = 10;
  for (let i = 0; i < 20; i++) {
    const r = await fetch(`${api.url}/v1/connections`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({
        service_type: "workflow_a",
        service_name: `n${i}`,
        base_url: sim.url,
        api_key: "sim-api-key",
        check_interval_seconds: INTERVAL,
      }),
    });
    t.equal(r.status, 201);
    await r.body?.cancel();
  }

  const probes = [0, 1].map(() => spawnVigil(t, ["serve", "--roles", "probe"], env));
  await Promise.all(probes.map((p) => p.waitFor(/probe scheduler started/, 60_000)));
  // 30 s: every connection's first check and two or three slots after it
  await sleep(30_000);
  for (const p of probes) p.proc.kill("SIGTERM");
  for (const p of probes) t.equal((await p.exited()).code, 0, "probe process exits cleanly");

  const checksBy = probes.map((p) =>
    [...p.output().matchAll(/"checks":(\d+)[^\n]*"msg":"probe stats"/g)].reduce(
      (n, m) => n + Number(m[1]),
      0,
    ),
  );
  t.ok(
    checksBy.every((n) => n > 0),
    `both processes checked connections (${checksBy.join(" and ")} checks in their stats)`,
  );
  const samples = await db.query<{ connection_id: string; ts: Date }>(
    "SELECT connection_id, ts FROM availability_samples ORDER BY connection_id, ts",
  );
  const byConnection = new Map<string, number[]>();
  for (const r of samples.rows)
    byConnection.set(r.connection_id, [...(byConnection.get(r.connection_id) ?? []), r.ts.getTime()]);
  t.equal(byConnection.size, 20, "every connection was checked");
  let closest = Number.POSITIVE_INFINITY;
  for (const times of byConnection.values())
    for (let i = 1; i < times.length; i++)
      closest = Math.min(closest, (times[i] as number) - (times[i - 1] as number));
  const counts = [...byConnection.values()].map((v) => v.length);
  t.ok(Math.min(...counts) >= 2, `each connection checked in several slots (${Math.min(...counts)}+)`);
  // slots of one connection are an interval apart; an off-phase first check is followed by the
  // next slot at least half an interval later (probes/schedule.ts); two processes checking one
  // slot would leave two samples well under a second apart (a quarter interval: slack for load)
  t.ok(
    closest >= (INTERVAL / 4) * 1000,
    `no connection checked twice in a slot: closest two checks of one connection ${(closest / 1000).toFixed(1)} s apart`,
  );
});

t.test("a cluster job runs once per period with two jobs processes", async (t) => {
  if (!(await requireBackend(t, "postgres"))) return;
  const env = {
    DATABASE_URL: await freshDatabaseUrl(t),
    VIGIL_SECRET: "background-roles-secret-background-roles",
    LOG_LEVEL: "info",
  };
  // The expiry job (retention) runs at start and then every hour, and says so at info on each run.
  const runs = (out: string) => out.split("retention: expired rows removed").length - 1;
  const a = spawnVigil(t, ["serve", "--roles", "jobs"], env);
  await a.waitFor(/retention: expired rows removed/, 60_000);
  const b = spawnVigil(t, ["serve", "--roles", "jobs"], env);
  await b.waitFor(/series store ready/, 60_000);
  await sleep(8_000);
  const total = runs(a.output()) + runs(b.output());
  t.equal(runs(a.output()), 1, "the first process ran the hourly expiry job once");
  t.equal(total, 1, `the hourly expiry job ran once in all, not once per process (ran ${total} times)`);
  for (const p of [a, b]) p.proc.kill("SIGTERM");
  for (const p of [a, b]) t.equal((await p.exited()).code, 0);
});
