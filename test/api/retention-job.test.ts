import t from "tap";
import { expiryJob, rollupsJob } from "../../src/jobs/jobs.js";
import { runJob } from "../../src/jobs/runner.js";
import { JOB_LOCKS } from "../../src/jobs/runner.js";

/** Taken by the node that runs rollups and expiry, so two nodes never rewrite a partition at once. */
const RETENTION_LOCK = JOB_LOCKS.retention;
import { availabilityDaily, availabilitySamples } from "../../src/stores/series/tables.js";
import { testApp } from "../helpers/app.js";
import { requireBackend } from "../helpers/backends.js";
import { seedTenants } from "../helpers/tenants.js";

const DAY = 86_400_000;

t.test("retention job on PostgreSQL: one node at a time rolls up and expires", async (t) => {
  if (!(await requireBackend(t, "postgres"))) return;
  const ta = await testApp(t, { relational: "postgres" });
  const w = await seedTenants(ta);
  const db = ta.ctx.stores.db;
  const s = ta.ctx.stores.series;
  await db.query("UPDATE users SET plan = 'free' WHERE id = $1", [w.users.alice.id]);
  const now = Date.now();
  await s.append(
    availabilitySamples,
    [1, 3, 10, 20].map((age) => ({
      ts: new Date(now - age * DAY),
      connection_id: w.conns.PA,
      available: true,
      synthetic: false,
      source: "probe",
    })),
  );
  // one node's retention run: rollups, then expiry, each under the retention lock
  const retentionRun = async () => {
    await runJob(ta.ctx, rollupsJob);
    await runJob(ta.ctx, expiryJob);
  };
  const pa = [{ column: "connection_id", op: "eq" as const, value: w.conns.PA }];

  // another node holds the lock: this one skips the run
  const other = await db.transaction(async (tx) => {
    await tx.query("SELECT pg_advisory_xact_lock($1)", [RETENTION_LOCK]);
    await retentionRun();
    return s.count(availabilityDaily, { where: pa });
  });
  t.equal(other, 0, "nothing rolled up while another node runs the job");

  // two nodes at once: the lock lets one run at a time; the result is that of one run
  await Promise.all([retentionRun(), retentionRun()]);
  t.equal(await s.count(availabilityDaily, { where: pa }), 4, "a daily row per sampled day");
  t.equal(
    await s.count(availabilitySamples, { where: pa }),
    2,
    "free plan: samples older than 7 days removed",
  );
});
