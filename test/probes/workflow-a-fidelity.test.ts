import http from "node:http";
import type { AddressInfo } from "node:net";
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
 * readiness. Each test fails on the adapter before #18; those after "#18 review" fail on the
 * adapter the review found wanting.
 */

/** A platform answering whatever `answer` says (a status and a raw body): for answers no real n8n should give. */
async function fakePlatform(t: Test, answer: (url: URL) => [number, string]) {
  const server = http.createServer((req, res) => {
    const [status, body] = answer(new URL(req.url ?? "/", "http://fake"));
    res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
    res.end(body);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  server.on("connection", (s) => t.teardown(() => s.destroy()));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const rowsOf = <R extends { execution_id: string }>(rows: R[], runId: string) =>
  rows.filter((r) => r.execution_id === runId);

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

type Tenants = Awaited<ReturnType<typeof seedTenants>>;

/** An app and its tenants; several tests may share one (each has its own simulator and connection). */
async function tenantApp(t: Test, series: BackendName): Promise<{ ta: TestApp; w: Tenants }> {
  const ta = await testApp(t, { series });
  return { ta, w: await seedTenants(ta) };
}

async function setup(
  t: Test,
  series: BackendName,
  executionsAtStart = 0,
  shared?: { ta: TestApp; w: Tenants },
) {
  const { ta, w } = shared ?? (await tenantApp(t, series));
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
  const tick = async (budget?: SyncBudget, deadlineMs?: number) => {
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
      deadlineMs,
    );
    state = out.state;
    await ta.ctx.stores.series.waitVisible();
    return out;
  };
  const setState = (s: SyncState) => {
    state = s;
  };
  return { ta, w, sim, id, tick, state: () => state, setState };
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

  t.test(
    `${series}: #18 review: a run resumed and closed while a sweep is open stays one row when the sweep meets it`,
    async (t) => {
      if (!(await requireBackend(t, series))) return;
      const { ta, sim, id, tick } = await setup(t, series);
      await control(sim.url, "executions", { count: 299, status: "success" }); // 1..299
      await control(sim.url, "executions", { count: 1, status: "running" }); // 300
      await control(sim.url, "executions", { count: 700, status: "success" }); // 301..1000
      const small = { pages: 1, reReads: 10, details: 5, names: 5 };
      await tick(small); // the sweep reads 1000..751; status=running stores 300 at its start
      const first = rowsOf(await stored(ta, id), "300");
      t.equal(first[0]?.status, "running");
      await control(sim.url, "executions/300", { status: "waiting" }, "PATCH");
      await sleep(20);
      await control(sim.url, "executions/300", { status: "success" }, "PATCH"); // resumed: a new startedAt
      await tick(small); // re-read by id: ended, written at its first start; the sweep reads 750..501
      for (let i = 0; i < 4; i++) await tick(small); // the sweep lists 300 with its new start
      const rows = await stored(ta, id);
      const three = rowsOf(rows, "300");
      t.equal(three.length, 1, "one row, not a second at the resumed start");
      t.equal(three[0]?.status, "success");
      t.equal(three[0]?.ts.toISOString(), first[0]?.ts.toISOString(), "at the start first stored");
      t.equal(rows.length, 1000);
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

// The review's findings on one app (a fresh one per test costs seconds); each test has its own
// simulator and connection.
t.test("#18 review", async (t) => {
  const shared = await tenantApp(t, "pglite");
  await t.test(
    "a workflow past any body bound still gives its name: only its beginning is read",
    async (t) => {
      const { ta, sim, id, tick } = await setup(t, "pglite", 1, shared);
      await control(sim.url, "platform", { workflowBytes: 17 * 1024 * 1024 }); // past the old 16 MiB bound too
      await control(sim.url, "workflows/wf-1", { name: 'Huge "quoted" flow' }, "PUT");
      await tick();
      const named = await ta.ctx.stores.db.query<{ name: string }>(
        "SELECT name FROM workflow_names WHERE connection_id = $1",
        [id],
      );
      t.same(
        named.rows.map((r) => r.name),
        ['Huge "quoted" flow'],
        "the top-level name, not a node's",
      );
    },
  );

  await t.test("re-reads take turns when more runs are followed than the budget re-reads", async (t) => {
    const { ta, sim, id, tick } = await setup(t, "pglite", 0, shared);
    await control(sim.url, "executions", { count: 6, status: "running" }); // 1..6
    await control(sim.url, "executions", { count: 1, status: "success" }); // 7: the sweep's top
    const small = { pages: 8, reReads: 3, details: 5, names: 5 };
    await tick(small);
    t.equal((await stored(ta, id)).filter((r) => r.status === "running").length, 6);
    // 1..3 run on; 4..6 end. Below the sweep's top, only a re-read by id finds that.
    for (const n of [4, 5, 6]) await control(sim.url, `executions/${n}`, { status: "success" }, "PATCH");
    await tick(small);
    await tick(small);
    const by = new Map((await stored(ta, id)).map((r) => [r.execution_id, r.status]));
    t.same(
      [4, 5, 6].map((n) => by.get(String(n))),
      ["success", "success", "success"],
      "the newer runs get their turn though the oldest stay open",
    );
    t.same(
      [1, 2, 3].map((n) => by.get(String(n))),
      ["running", "running", "running"],
    );
  });

  await t.test(
    "past the bound of followed runs, never-stored ids go first, and the log says so",
    async (t) => {
      const { sim, tick, state, setState } = await setup(t, "pglite", 0, shared);
      // 2,000 ids followed that were never stored (holes), and five running runs that will be.
      setState({
        highWater: "0",
        tracked: Array.from({ length: 2000 }, (_, i) => ({ id: String(100_001 + i), stored: false })),
      });
      await control(sim.url, "executions", { count: 5, status: "running" }); // 1..5
      const out = await tick({ pages: 1, reReads: 0, details: 0, names: 0 });
      const ids = new Set((state().tracked ?? []).map((r) => r.id));
      t.equal(ids.size, 2000, "still bounded");
      t.ok(
        ["1", "2", "3", "4", "5"].every((x) => ids.has(x)),
        "the stored running runs are still followed",
      );
      t.notOk(ids.has("100001"), "a never-stored id went instead");
      t.match(out.warnings, [/stopped following 5 runs/], "said in the log");
    },
  );

  await t.test("a burst of waiting runs wider than 50 ids is found, over ticks", async (t) => {
    const { ta, sim, id, tick, state } = await setup(t, "pglite", 1, shared);
    await tick();
    await control(sim.url, "executions", { count: 55, status: "waiting" }); // 2..56: hidden from every list
    await control(sim.url, "executions", { count: 1, status: "success" }); // 57
    await tick();
    await tick();
    const rows = await stored(ta, id);
    t.equal(rows.filter((r) => r.status === "waiting").length, 55, "every waiting run of the hole");
    t.equal(rows.length, 57);
    t.notOk(state().gaps, "the hole is done");
  });

  await t.test("holes are kept as ranges of at most 10,000 ids; what is past it is said", async (t) => {
    const { sim, tick, state } = await setup(t, "pglite", 1, shared);
    await tick();
    await control(sim.url, "executions", { count: 1, status: "success" });
    (sim.executions[sim.executions.length - 1] as { id: string }).id = "20002"; // 20,000 ids hidden below it
    const out = await tick({ pages: 8, reReads: 0, details: 0, names: 0 });
    const kept = (state().gaps ?? []).reduce((n, g) => n + Number(g.hi) - Number(g.lo) + 1, 0);
    t.equal(kept, 10_000, "the newest 10,000 are kept to be looked up");
    t.same(state().gaps, [{ hi: "20001", lo: "10002" }], "as one range");
    t.match(out.warnings, [/10000 ids missing from the list were not looked up/]);
  });

  await t.test("a queued run (startedAt null, as in n8n) is stored at its createdAt, once", async (t) => {
    const { ta, sim, id, tick } = await setup(t, "pglite", 2, shared);
    await tick();
    await control(sim.url, "executions", { count: 1, status: "new" }); // 3: queued
    await control(sim.url, "executions", { count: 1, status: "success" }); // 4
    const created = sim.executions.find((e) => e.id === "3")?.createdAt;
    t.equal(sim.executions.find((e) => e.id === "3")?.startedAt, null, "no start yet");
    await tick();
    let three = rowsOf(await stored(ta, id), "3");
    t.equal(three[0]?.status, "running", "stored though it has no start");
    t.equal(three[0]?.ts.toISOString(), created, "at its createdAt (only the by-id answer has it)");
    await sleep(10);
    await control(sim.url, "executions/3", { status: "running" }, "PATCH"); // starts: startedAt set
    await tick();
    await control(sim.url, "executions/3", { status: "success" }, "PATCH");
    await tick();
    await control(sim.url, "executions", { count: 1, status: "success" }); // 5: the sweep moves on
    await tick();
    three = rowsOf(await stored(ta, id), "3");
    t.equal(three.length, 1, "one row");
    t.equal(three[0]?.status, "success");
    t.equal(three[0]?.ts.toISOString(), created);
  });

  await t.test("a cursor n8n refuses is rebuilt; the sweep goes on", async (t) => {
    const { ta, id, tick, state } = await setup(t, "pglite", 620, shared);
    const small = { pages: 1, reReads: 10, details: 5, names: 5 };
    await tick(small);
    const sweep = state().sweep;
    t.ok(sweep?.cursor);
    if (sweep) sweep.cursor = "garbage"; // a corrupted state, or a cursor of another n8n version
    for (let i = 0; i < 3; i++) await tick(small);
    t.equal((await stored(ta, id)).length, 620, "the sweep reached the bottom");
    t.notOk(state().sweep, "and ended");
    t.equal(state().highWater, "620");
  });

  await t.test("a tick stops starting requests at its deadline and continues at the next", async (t) => {
    const { ta, sim, id, tick, state } = await setup(t, "pglite", 2000, shared); // eight pages of 250
    await control(sim.url, "state", { latencyMs: 100 });
    const out = await tick(undefined, 350);
    t.equal(out.stoppedBy, "deadline");
    t.ok(out.requests >= 1 && out.requests <= 4, `${out.requests} requests of ~100 ms in 350 ms`);
    t.ok(state().sweep?.cursor, "its place is kept");
    await control(sim.url, "state", { latencyMs: 0 });
    for (let i = 0; i < 3 && (i === 0 || state().sweep); i++) await tick();
    t.equal((await stored(ta, id)).length, 2000, "everything after the next ticks");
  });
});

t.test("#18 review: odd answers are skipped, never stop the sync, and never become positions", async (t) => {
  const at = (s: number) => new Date(Date.now() - s * 1000).toISOString();
  const run = (id: string, status = "success") => ({
    id,
    finished: status === "success",
    mode: "webhook",
    status,
    startedAt: at(60),
    stoppedAt: at(59),
    workflowId: "wf",
    waitTill: null,
  });
  let list: unknown[] = [null, 7, "x", run("3", "constructor"), run("2", "toString"), run("1")];
  const url = await fakePlatform(t, (u) => {
    if (u.pathname === "/api/v1/executions")
      return [200, u.searchParams.get("status") ? "null" : JSON.stringify({ data: list, nextCursor: null })];
    return [200, "null"]; // by id, workflows: a JSON null
  });
  const ta = await testApp(t);
  const w = await seedTenants(ta);
  const r = await call(ta.app, w.keys.alicePersonal, "POST", "/v1/connections", {
    service_type: "workflow_a",
    service_name: "odd",
    base_url: url,
    api_key: "k",
  });
  const id = r.json().connection.id as string;
  const agent = createProbeAgent();
  t.teardown(() => agent.close());
  let state: SyncState = {};
  const tick = async () => {
    const out = await syncExecutions(
      ta.ctx,
      agent,
      {
        id,
        serviceType: "workflow_a",
        baseUrl: url,
        apiKey: "k",
        apiToken: null,
        region: null,
        teamId: null,
        state,
        lastSyncAt: null,
      },
      2000,
    );
    state = out.state;
    await ta.ctx.stores.series.waitVisible();
  };
  await tick();
  const by = new Map((await stored(ta, id)).map((x) => [x.execution_id, x.status]));
  t.equal(by.get("3"), "constructor", "Object's own names are statuses Vigil does not know");
  t.equal(by.get("2"), "tostring");
  t.equal(by.get("1"), "success");
  list = [run("99999999999999999999999"), run("5"), run("4"), run("3")];
  await tick();
  t.equal(state.highWater, "5", "an absurd id is stored but is not the sweep's top");
  list = [run("6"), run("5")];
  await tick();
  t.ok(
    (await stored(ta, id)).some((x) => x.execution_id === "6"),
    "runs after it are still read",
  );
});

t.test("#18 review: a 5xx with a large body is an outage, not a large answer", async (t) => {
  const url = await fakePlatform(t, (u) =>
    u.pathname.startsWith("/healthz")
      ? [200, '{"status":"ok"}']
      : [500, JSON.stringify({ message: "x".repeat(400 * 1024) })],
  );
  const agent = createProbeAgent();
  t.teardown(() => agent.close());
  const check = await runCheck(
    agent,
    { serviceType: "workflow_a", baseUrl: url, apiKey: "k", apiToken: null, region: null },
    { timeoutMs: 2000, workflowBApiTemplate: "" },
  );
  t.equal(check.available, false);
  t.equal(check.statusCode, 500);
  t.equal(check.reason, "http_status");
});
