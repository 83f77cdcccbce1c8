import t, { type Test } from "tap";
import { ProbeWorker } from "../../src/probes/worker.js";
import { startWorkflowA } from "../../src/sim/workflow-a.js";
import { startWorkflowB } from "../../src/sim/workflow-b.js";
import { executions } from "../../src/stores/series/tables.js";
import { type TestApp, testApp } from "../helpers/app.js";
import { type BackendName, requireBackend } from "../helpers/backends.js";
import { call, seedTenants } from "../helpers/tenants.js";

const control = (url: string, path: string, body: unknown, method = "POST") =>
  fetch(`${url}/__sim/${path}`, {
    method,
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });

/** One slot a minute or more after the last sync (executions are pulled at most once a minute). */
async function runSlot(ta: TestApp, worker: ProbeWorker, id: string) {
  await ta.ctx.stores.db.query(
    "UPDATE connections SET next_check_at = now(), last_sync_at = last_sync_at - interval '61 seconds' WHERE id = $1",
    [id],
  );
  await worker.tick();
  await worker.idle();
  await ta.ctx.stores.series.waitVisible();
}

const stored = async (ta: TestApp, id: string) =>
  (
    await ta.ctx.stores.series.page(executions, {
      where: [{ column: "connection_id", op: "eq", value: id }],
      limit: 5000,
    })
  ).rows;

for (const series of ["pglite", "questdb"] as BackendName[]) {
  t.test(
    `workflow_a execution sync on ${series}: newest first, no duplicates, status changes update the row`,
    async (t) => {
      if (!(await requireBackend(t, series))) return;
      const ta = await testApp(t, { series });
      const w = await seedTenants(ta);
      const sim = await startWorkflowA({ executions: 300 }); // more than one page of 250
      t.teardown(() => sim.close());
      const worker = new ProbeWorker(ta.ctx, { timeoutMs: 2000 });
      t.teardown(() => worker.stop());
      const r = await call(ta.app, w.keys.alicePersonal, "POST", "/v1/connections", {
        service_type: "workflow_a",
        service_name: "n8n",
        base_url: sim.url,
        api_key: "sim-api-key",
      });
      const id = r.json().connection.id;

      await runSlot(ta, worker, id);
      let rows = await stored(ta, id);
      t.equal(rows.length, 300, "the first pull pages through everything");
      const lastSync = (
        await ta.ctx.stores.db.query<{ last_sync_at: Date | null }>(
          "SELECT last_sync_at FROM connections WHERE id = $1",
          [id],
        )
      ).rows[0];
      t.ok(lastSync?.last_sync_at, "last sync time kept");

      await control(sim.url, "executions", { count: 2, status: "running", workflowId: "wf-9" });
      await control(sim.url, "executions", { count: 1, status: "error", workflowId: "wf-9" });
      await runSlot(ta, worker, id);
      rows = await stored(ta, id);
      t.equal(rows.length, 303, "only the new ones added");
      t.equal(rows.filter((e) => e.status === "running").length, 2);
      t.equal(rows.find((e) => e.execution_id === "303")?.status, "error");

      await control(sim.url, "executions/301", { status: "success" }, "PATCH");
      await control(sim.url, "executions", { count: 1, status: "success" });
      await runSlot(ta, worker, id);
      rows = await stored(ta, id);
      t.equal(rows.length, 304, "no duplicates");
      const finished = rows.find((e) => e.execution_id === "301");
      t.equal(finished?.status, "success", "running -> success updates the stored row");
      t.ok(finished?.duration_ms !== null && finished?.stopped_at, "with its end");
      t.equal(rows.find((e) => e.execution_id === "302")?.status, "running", "still running");
    },
  );
}

t.test("workflow_b execution sync: the team's scenarios and their logs", async (t) => {
  const sim = await startWorkflowB({ apiToken: "tok", teamId: "7" });
  t.teardown(() => sim.close());
  const ta = await testApp(t, { env: { WORKFLOW_B_API_TEMPLATE: `${sim.url}/{region}/api/v2` } });
  const w = await seedTenants(ta);
  const worker = new ProbeWorker(ta.ctx, { timeoutMs: 2000 });
  t.teardown(() => worker.stop());
  await control(sim.url, "logs", { scenarioId: 101, count: 3, status: 1 });
  await control(sim.url, "logs", { scenarioId: 102, count: 1, status: 3 });
  const r = await call(ta.app, w.keys.alicePersonal, "POST", "/v1/connections", {
    service_type: "workflow_b",
    service_name: "make",
    api_token: "tok",
    region: "eu2",
    team_id: "7",
  });
  const id = r.json().connection.id;
  await runSlot(ta, worker, id);
  let rows = await stored(ta, id);
  t.equal(rows.length, 4);
  t.same(
    rows.filter((e) => e.status === "error").map((e) => e.workflow_id),
    ["102"],
  );
  await control(sim.url, "logs", { scenarioId: 101, count: 1, status: 2 });
  await runSlot(ta, worker, id);
  rows = await stored(ta, id);
  t.equal(rows.length, 5, "overlapping windows add no duplicates");
  // A warning run carries Make's own message (the simulator's default warning), not a status echo.
  const warned = rows.filter(
    (e) => e.error === "Module timed out; the scenario went on with the next bundle.",
  );
  t.equal(warned.length, 1);
  t.equal(warned[0]?.status, "success", "a warning is a completed run");
  t.equal(warned[0]?.error_node, "http:ActionSendData", "the module that warned");
});

/** A simulated n8n with `executions` runs, the platform paths it is asked (in order), a worker and a connection to it. */
async function watched(t: Test, executions: number, timeoutMs: number) {
  const ta = await testApp(t);
  const w = await seedTenants(ta);
  const sim = await startWorkflowA({ executions });
  t.teardown(() => sim.close());
  const asked: string[] = [];
  sim.server.on("request", (req: { url?: string }) => {
    if (!req.url?.startsWith("/__sim")) asked.push(req.url ?? "");
  });
  const worker = new ProbeWorker(ta.ctx, { timeoutMs });
  t.teardown(() => worker.stop());
  const id = (
    await call(ta.app, w.keys.alicePersonal, "POST", "/v1/connections", {
      service_type: "workflow_a",
      service_name: "n8n",
      base_url: sim.url,
      api_key: "sim-api-key",
    })
  ).json().connection.id as string;
  return { ta, sim, asked, worker, id };
}

t.test("workflow_a: a check that syncs asks for the list page once, after the one key check", async (t) => {
  const { ta, sim, asked, worker, id } = await watched(t, 5, 2000);
  const listPage = "/api/v1/executions?limit=250";

  asked.length = 0;
  await runSlot(ta, worker, id);
  t.equal((await stored(ta, id)).length, 5, "the runs are stored");
  t.equal(asked.filter((p) => p === listPage).length, 1, "the list page is asked once");
  t.equal(asked.filter((p) => p === "/api/v1/executions?limit=1").length, 1, "one key check");
  t.notOk(asked.includes("/healthz/readiness"), "readiness only when the API fails");
  t.same(asked.slice(0, 3), [
    "/api/v1/executions?limit=1",
    listPage,
    "/api/v1/executions?status=running&limit=250",
  ]);
  const status = async () =>
    (
      await ta.ctx.stores.db.query<{ consecutive_failures: number }>(
        "SELECT consecutive_failures FROM connections WHERE id = $1",
        [id],
      )
    ).rows[0];
  t.match(await status(), { consecutive_failures: 0 });

  await control(sim.url, "executions", { count: 3, status: "success", workflowId: "wf-1" });
  asked.length = 0;
  await runSlot(ta, worker, id);
  t.equal((await stored(ta, id)).length, 8, "the new runs come from the check's page");
  t.equal(asked.filter((p) => p === listPage).length, 1);

  // A check with no sync due is its small key check alone: one request.
  asked.length = 0;
  await ta.ctx.stores.db.query("UPDATE connections SET next_check_at = now() WHERE id = $1", [id]);
  await worker.tick();
  await worker.idle();
  t.same(asked, ["/api/v1/executions?limit=1"]);

  // A wrong key on a sync's check is still a bad key, and nothing is pulled with it.
  await control(sim.url, "state", { fault: "bad_credentials" });
  asked.length = 0;
  await runSlot(ta, worker, id);
  t.same(asked, ["/api/v1/executions?limit=1"]);
  t.match(await status(), { consecutive_failures: 1 });
});

t.test("workflow_a: a sweep left part-way continues from its cursor after the small key check", async (t) => {
  // more than one sync's 8 pages of 250
  const { ta, asked, worker, id } = await watched(t, 2_100, 5000);
  await runSlot(ta, worker, id);
  t.equal((await stored(ta, id)).length, 2_000, "eight pages in the first tick");
  asked.length = 0;
  await runSlot(ta, worker, id);
  t.equal((await stored(ta, id)).length, 2_100, "the rest in the next");
  t.equal(asked[0], "/api/v1/executions?limit=1", "the key check");
  t.notOk(asked.includes("/api/v1/executions?limit=250"), "no page the sweep cannot use");
  t.ok(
    asked.some((p) => p.includes("cursor=")),
    "the sweep goes on from its cursor",
  );
});
