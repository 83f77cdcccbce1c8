import t from "tap";
import { type Job, JobRunner, runJob } from "../../src/jobs/runner.js";
import { testApp } from "../helpers/app.js";
import { requireBackend } from "../helpers/backends.js";

const LOCK = 0x76676cf0;

t.test("jobs sharing a lock take turns in one process; the runner runs each at start", async (t) => {
  const ta = await testApp(t);
  const log: string[] = [];
  const slow = (name: string): Job => ({
    name,
    intervalMs: 60_000,
    lock: LOCK,
    run: async () => {
      log.push(`${name} start`);
      await new Promise((r) => setTimeout(r, 50));
      log.push(`${name} end`);
    },
  });
  await Promise.all([runJob(ta.ctx, slow("a")), runJob(ta.ctx, slow("b"))]);
  t.same(log, ["a start", "a end", "b start", "b end"], "never at once");

  let runs = 0;
  const failing: Job = {
    name: "failing",
    intervalMs: 20,
    lock: null,
    run: async () => {
      runs++;
      throw new Error("boom");
    },
  };
  const runner = new JobRunner(ta.ctx, [failing]);
  runner.start();
  await new Promise((r) => setTimeout(r, 200));
  await runner.stop();
  t.ok(runs >= 2, `a failed run is retried at the next interval (${runs} runs)`);
  const after = runs;
  await new Promise((r) => setTimeout(r, 100));
  t.equal(runs, after, "nothing runs after stop");
});

t.test("on PostgreSQL a job is skipped while another node holds its lock", async (t) => {
  if (!(await requireBackend(t, "postgres"))) return;
  const ta = await testApp(t, { relational: "postgres" });
  let ran = 0;
  const job: Job = { name: "x", intervalMs: 1000, lock: LOCK, run: async () => void ran++ };
  const skipped = await ta.ctx.stores.db.transaction(async (tx) => {
    await tx.query("SELECT pg_advisory_xact_lock($1)", [LOCK]);
    return runJob(ta.ctx, job);
  });
  t.equal(skipped, false);
  t.equal(ran, 0, "skipped");
  t.equal(await runJob(ta.ctx, job), true);
  t.equal(ran, 1, "runs once the lock is free");
});
