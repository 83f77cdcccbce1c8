import t, { type Test } from "tap";
import { createProbeAgent } from "../../src/probes/http.js";
import type { SyncBudget, SyncState } from "../../src/probes/platform.js";
import { runCheck } from "../../src/probes/platforms.js";
import { syncExecutions } from "../../src/probes/sync.js";
import { ProbeWorker } from "../../src/probes/worker.js";
import { startWorkflowA } from "../../src/sim/workflow-a.js";
import { executions } from "../../src/stores/series/tables.js";
import { type TestApp, testApp } from "../helpers/app.js";
import { type BackendName, requireBackend } from "../helpers/backends.js";
import { call, seedTenants } from "../helpers/tenants.js";

/**
 * workflow_a against a simulator that behaves like real n8n 1.123 (src/sim/workflow-a.ts): runs
 * the list hides, resumed runs, page budgets, statuses, failure reasons, names, big workflows and
 * readiness. Each test fails on the adapter before #18.
 */

const control = (url: string, path: string, body: unknown, method = "POST") =>
  fetch(`${url}/__sim/${path}`, {
    method,
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });

const stored = async (ta: TestApp, id: string) =>
  (
    await ta.ctx.stores.series.page(executions, {
      where: [{ column: "connection_id", op: "eq", value: id }],
      limit: 5000,
    })
  ).rows;

async function setup(t: Test, series: BackendName, executionsAtStart = 0) {
  const ta = await testApp(t, { series });
  const w = await seedTenants(ta);
  const sim = await startWorkflowA({ executions: executionsAtStart });
  t.teardown(() => sim.close());
  const r = await call(ta.app, w.keys.alicePersonal, "POST", "/v1/connections", {
    service_type: "workflow_a",
    service_name: "n8n",
    base_url: sim.url,
    api_key: "sim-api-key",
  });
  const id = r.json().connection.id as string;
  const agent = createProbeAgent();
  t.teardown(() => agent.close());
  let state: SyncState = {};
  /** One sync tick, as the worker runs it, keeping the state between ticks. */
  const tick = async (budget?: SyncBudget) => {
    const out = await syncExecutions(
      ta.ctx,
      agent,
      {
        id,
        serviceType: "workflow_a",
        baseUrl: sim.url,
        apiKey: "sim-api-key",
        apiToken: null,
        region: null,
        teamId: null,
        state,
        lastSyncAt: null,
      },
      2000,
      budget,
    );
    state = out.state;
    await ta.ctx.stores.series.waitVisible();
    return out;
  };
  return { ta, w, sim, id, tick, state: () => state };
}

for (const series of ["pglite", "questdb"] as BackendName[]) {
  t.test(
    `${series}: a run still running during a sync is not lost when quicker runs finish after it`,
    async (t) => {
      if (!(await requireBackend(t, series))) return;
      const { ta, sim, id, tick } = await setup(t, series, 3);
      await tick();
      await control(sim.url, "executions", { count: 1, status: "running" }); // id 4: long
      await control(sim.url, "executions", { count: 2, status: "success" }); // 5, 6: quick
      await tick();
      let rows = await stored(ta, id);
      t.same(
        rows.map((r) => r.execution_id).sort(),
        ["1", "2", "3", "4", "5", "6"],
        "the running run is found though n8n leaves it out of the list",
      );
      t.equal(rows.find((r) => r.execution_id === "4")?.status, "running");
      await control(sim.url, "executions/4", { status: "success" }, "PATCH");
      await tick();
      rows = await stored(ta, id);
      t.equal(rows.length, 6, "one row per run");
      t.equal(rows.find((r) => r.execution_id === "4")?.status, "success", "fetched again once it ended");
    },
  );

  t.test(
    `${series}: a waiting run hidden from every listing is found, and stays one row after its resume`,
    async (t) => {
      if (!(await requireBackend(t, series))) return;
      const { ta, sim, id, tick } = await setup(t, series, 2);
      await tick();
      await control(sim.url, "executions", { count: 1, status: "waiting" }); // id 3
      await control(sim.url, "executions", { count: 1, status: "success" }); // id 4
      await tick();
      let rows = await stored(ta, id);
      const waiting = rows.find((r) => r.execution_id === "3");
      t.equal(waiting?.status, "waiting", "the hole in the ids is looked up by id");
      const firstStart = waiting?.ts.toISOString();

      await new Promise((r) => setTimeout(r, 20));
      await control(sim.url, "executions/3", { status: "running" }, "PATCH"); // resumed: n8n rewrites startedAt
      await tick();
      await control(sim.url, "executions/3", { status: "success" }, "PATCH");
      await control(sim.url, "executions", { count: 1, status: "success" }); // id 5
      await tick();
      rows = await stored(ta, id);
      const three = rows.filter((r) => r.execution_id === "3");
      t.equal(three.length, 1, "one row for the resumed run, not one per start");
      t.equal(three[0]?.status, "success");
      t.equal(three[0]?.ts.toISOString(), firstStart, "kept at its first start");
      t.equal(rows.length, 5);
    },
  );

  t.test(`${series}: a sync that runs out of pages resumes where it stopped`, async (t) => {
    if (!(await requireBackend(t, series))) return;
    const { ta, sim, id, tick, state } = await setup(t, series, 620);
    const small = { pages: 1, reReads: 10, details: 5, names: 5 };
    await tick(small);
    t.equal((await stored(ta, id)).length, 250, "one page this tick");
    t.ok(state().sweep?.cursor, "the sweep's place is kept");
    await control(sim.url, "executions", { count: 3, status: "success" }); // 621..623 arrive meanwhile
    await tick(small);
    await tick(small);
    t.equal((await stored(ta, id)).length, 620, "the first sweep reached the bottom");
    t.notOk(state().sweep, "and ended");
    await tick(small);
    const rows = await stored(ta, id);
    t.equal(rows.length, 623, "the next sweep took what came meanwhile");
    t.equal(new Set(rows.map((r) => r.execution_id)).size, 623, "no duplicates");
  });
}

t.test("statuses: every n8n status maps; an unknown one is stored as such, not as running", async (t) => {
  const { ta, sim, id, tick, state } = await setup(t, "pglite");
  for (const status of ["success", "error", "crashed", "canceled", "unknown", "new"])
    await control(sim.url, "executions", { count: 1, status });
  // A status from a future n8n: the simulator lets a test set any value on a run.
  await control(sim.url, "executions", { count: 1, status: "success" });
  const future = sim.executions[sim.executions.length - 1];
  if (future) (future as { status: string }).status = "paused-by-admin";
  await tick();
  const by = new Map((await stored(ta, id)).map((r) => [r.execution_id, r]));
  t.equal(by.get("1")?.status, "success");
  t.equal(by.get("2")?.status, "error");
  t.equal(by.get("3")?.status, "error", "crashed is a failure");
  t.match(by.get("3")?.error, /crash|Simulated failure/);
  t.equal(by.get("4")?.status, "cancelled", "canceled is the spec's cancelled");
  t.equal(by.get("5")?.status, "unknown", "unknown is stored as unknown");
  t.equal(by.get("6")?.status, "running", "new (queued) is not finished");
  t.equal(by.get("7")?.status, "paused-by-admin", "a status Vigil does not know is kept as sent");
  t.same(
    (state().tracked ?? []).map((r) => r.id),
    ["6"],
    "only the queued run is followed; unknown ones are not taken for running",
  );
});

t.test("a tracked run that disappears from the platform is marked, not left running", async (t) => {
  const { ta, sim, id, tick, state } = await setup(t, "pglite");
  await control(sim.url, "executions", { count: 1, status: "running" });
  await tick();
  t.equal((await stored(ta, id))[0]?.status, "running");
  await control(sim.url, "executions/1", {}, "DELETE");
  await tick();
  const row = (await stored(ta, id))[0];
  t.equal(row?.status, "unknown");
  t.match(row?.error, /no longer on the platform/);
  t.notOk(state().tracked, "no longer followed");
});

t.test("failed runs carry n8n's message, failing node and last node; workflows their names", async (t) => {
  const { ta, w, sim, id, tick } = await setup(t, "pglite");
  await control(sim.url, "workflows/wf-7", { name: "Invoice intake" }, "PUT");
  await control(sim.url, "executions", {
    count: 1,
    status: "error",
    workflowId: "wf-7",
    error: "Request failed with status code 502",
    node: "HTTP Request",
  });
  await control(sim.url, "executions", { count: 2, status: "success", workflowId: "wf-7" });
  await tick();
  const rows = await stored(ta, id);
  const failed = rows.find((r) => r.execution_id === "1");
  t.equal(failed?.error, "Request failed with status code 502", "the platform's message, not a status echo");
  t.equal(failed?.error_node, "HTTP Request");
  t.equal(failed?.last_node, "HTTP Request");

  const res = await call(
    ta.app,
    w.keys.alicePersonal,
    "GET",
    `/v1/executions?connection_id=${id}&include_error_details=true&status=error`,
  );
  t.equal(res.statusCode, 200);
  t.match(res.json().data[0], {
    execution_id: "1",
    workflow_id: "wf-7",
    workflow_name: "Invoice intake",
    error: "Request failed with status code 502",
    error_node: "HTTP Request",
    last_node: "HTTP Request",
  });
  const plain = await call(ta.app, w.keys.alicePersonal, "GET", `/v1/executions?connection_id=${id}`);
  t.equal(plain.json().data[0].workflow_name, "Invoice intake", "names without error details too");
  t.notOk("error_node" in plain.json().data[0], "reasons only when asked for");
  const grouped = await call(
    ta.app,
    w.keys.alicePersonal,
    "GET",
    `/v1/executions?connection_id=${id}&group_by=workflow`,
  );
  t.match(grouped.json().data[0], {
    workflow_id: "wf-7",
    workflow_name: "Invoice intake",
    runs: 3,
    errors: 1,
  });
});

t.test("checks measure the platform, not its payload; readiness after a restart", async (t) => {
  const sim = await startWorkflowA({ apiKey: "k" });
  t.teardown(() => sim.close());
  const agent = createProbeAgent();
  t.teardown(() => agent.close());
  const target = {
    serviceType: "workflow_a" as const,
    baseUrl: sim.url,
    apiKey: "k",
    apiToken: null,
    region: null,
  };
  const opts = { timeoutMs: 2000, workflowBApiTemplate: "" };

  await control(sim.url, "platform", { workflowBytes: 2_200_000 }); // a 2.2 MB Code node
  const big = await runCheck(agent, target, opts);
  t.equal(big.available, true, "a huge workflow is not an outage");
  t.notOk(big.reason, "and the check never read it");

  await control(sim.url, "platform", { ready: false }); // /healthz answers, the API is not mounted yet
  const starting = await runCheck(agent, target, opts);
  t.equal(starting.available, false, "not ready is not up");
  t.equal(starting.statusCode, 503);
  await control(sim.url, "platform", { ready: true });
  t.equal((await runCheck(agent, target, opts)).available, true);
  t.equal((await runCheck(agent, { ...target, apiKey: "wrong" }, opts)).reason, "bad_credentials");
});

t.test("a huge workflow opens no incident and does not stop the sync (worker end to end)", async (t) => {
  const ta = await testApp(t);
  const w = await seedTenants(ta);
  const sim = await startWorkflowA({ executions: 4 });
  t.teardown(() => sim.close());
  await control(sim.url, "platform", { workflowBytes: 2_200_000 });
  const worker = new ProbeWorker(ta.ctx, { timeoutMs: 2000 });
  t.teardown(() => worker.stop());
  const r = await call(ta.app, w.keys.alicePersonal, "POST", "/v1/connections", {
    service_type: "workflow_a",
    service_name: "n8n",
    base_url: sim.url,
    api_key: "sim-api-key",
    failure_threshold: 1,
  });
  const id = r.json().connection.id as string;
  for (let i = 0; i < 3; i++) {
    await ta.ctx.stores.db.query(
      "UPDATE connections SET next_check_at = now(), last_sync_at = last_sync_at - interval '61 seconds' WHERE id = $1",
      [id],
    );
    await worker.tick();
    await worker.idle();
  }
  await ta.ctx.stores.series.waitVisible();
  const incidents = await ta.ctx.stores.db.query("SELECT id FROM incidents WHERE connection_id = $1", [id]);
  t.equal(incidents.rowCount, 0, "no incident, no e-mail");
  const conn = await call(ta.app, w.keys.alicePersonal, "GET", `/v1/connections/${id}`);
  t.equal(conn.json().status, "active");
  t.equal((await stored(ta, id)).length, 4, "executions synced");
  const named = await ta.ctx.stores.db.query<{ name: string }>(
    "SELECT name FROM workflow_names WHERE connection_id = $1",
    [id],
  );
  t.same(
    named.rows.map((r) => r.name),
    ["Simulated workflow wf-1"],
    "even a 2.2 MB workflow's name is read (by id, bounded)",
  );
});
