import t from "tap";
import { startGatewaySim } from "../../src/sim/gateway.js";
import { startWorkflowA } from "../../src/sim/workflow-a.js";
import { startWorkflowB } from "../../src/sim/workflow-b.js";
import { gatewayHeartbeats } from "../../src/stores/series/tables.js";
import { testApp } from "../helpers/app.js";
import { spawnVigil } from "../helpers/process.js";
import { seedTenants } from "../helpers/tenants.js";

const control = (url: string, path: string, body: unknown, method = "POST") =>
  fetch(`${url}/__sim/${path}`, {
    method,
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });

t.test("workflow_a: health, credentials, executions newest first with cursors, control", async (t) => {
  const sim = await startWorkflowA({ apiKey: "k1", executions: 5 });
  t.teardown(() => sim.close());
  t.equal((await fetch(`${sim.url}/healthz`)).status, 200);
  t.equal(
    (await fetch(`${sim.url}/api/v1/workflows?limit=1`, { headers: { "X-N8N-API-KEY": "k1" } })).status,
    200,
  );
  t.equal(
    (await fetch(`${sim.url}/api/v1/workflows?limit=1`, { headers: { "X-N8N-API-KEY": "nope" } })).status,
    401,
  );

  await control(sim.url, "executions", { count: 3, status: "running", workflowId: "wf-2" });
  const ids: string[] = [];
  let cursor: string | null = null;
  do {
    const r = await fetch(`${sim.url}/api/v1/executions?limit=3${cursor ? `&cursor=${cursor}` : ""}`, {
      headers: { "X-N8N-API-KEY": "k1" },
    });
    const b = (await r.json()) as {
      data: { id: string; status: string; stoppedAt: string | null }[];
      nextCursor: string | null;
    };
    ids.push(...b.data.map((e) => e.id));
    cursor = b.nextCursor;
  } while (cursor);
  // As real n8n: runs its process still holds are left out of the list, and shown with status=running.
  t.same(
    ids,
    ["5", "4", "3", "2", "1"],
    "newest first, every finished execution once, running ones left out",
  );
  const running = (await (
    await fetch(`${sim.url}/api/v1/executions?status=running`, { headers: { "X-N8N-API-KEY": "k1" } })
  ).json()) as { data: { id: string }[] };
  t.same(
    running.data.map((e) => e.id),
    ["8", "7", "6"],
    "status=running lists them",
  );
  const patched = await control(sim.url, "executions/8", { status: "success" }, "PATCH");
  t.equal(((await patched.json()) as { status: string }).status, "success", "a running execution can finish");
  t.equal((await control(sim.url, "executions", { status: "exploded" })).status, 400);

  await control(sim.url, "state", { fault: "bad_credentials" });
  t.equal((await fetch(`${sim.url}/api/v1/workflows`, { headers: { "X-N8N-API-KEY": "k1" } })).status, 401);
  await control(sim.url, "state", { fault: "down" });
  t.equal((await fetch(`${sim.url}/healthz`)).status, 503);
  t.equal((await control(sim.url, "state", { fault: "on fire" })).status, 400);
});

t.test("faults: slow, hang, garbage, huge, redirect, close", async (t) => {
  const sim = await startWorkflowA();
  t.teardown(() => sim.close());
  await control(sim.url, "state", { fault: "none", latencyMs: 150 });
  const t0 = Date.now();
  await fetch(`${sim.url}/healthz`);
  t.ok(Date.now() - t0 >= 140, "latency applied");

  await control(sim.url, "state", { fault: "hang", latencyMs: 0 });
  await t.rejects(fetch(`${sim.url}/healthz`, { signal: AbortSignal.timeout(300) }), "hang never answers");
  await control(sim.url, "state", { fault: "garbage" });
  await t.rejects((await fetch(`${sim.url}/healthz`)).json(), SyntaxError, "garbage is not JSON");
  await control(sim.url, "state", { fault: "redirect" });
  const r = await fetch(`${sim.url}/healthz`, { redirect: "manual" });
  t.equal(r.status, 302);
  t.match(r.headers.get("location"), /^\/healthz\?r=/);
  await control(sim.url, "state", { fault: "close" });
  await t.rejects(
    fetch(`${sim.url}/healthz`).then((x) => x.text()),
    "connection closed mid-response",
  );
  await control(sim.url, "state", { fault: "huge" });
  const huge = await fetch(`${sim.url}/healthz`);
  const reader = huge.body?.getReader();
  let got = 0;
  while (reader && got < 1024 * 1024) got += (await reader.read()).value?.length ?? 0;
  await reader?.cancel();
  t.ok(got >= 1024 * 1024, "streams a body far larger than any real answer");
  await control(sim.url, "state", { fault: "none" });
  t.equal((await fetch(`${sim.url}/healthz`)).status, 200, "recovers");
});

t.test("workflow_b: region prefix, token auth, scenarios and logs in a window", async (t) => {
  const sim = await startWorkflowB({ apiToken: "tok", teamId: "7" });
  t.teardown(() => sim.close());
  const api = `${sim.url}/eu1/api/v2`;
  const auth = { authorization: "Token tok" };
  t.equal((await fetch(`${api}/users/me`, { headers: auth })).status, 200);
  t.equal((await fetch(`${api}/users/me`, { headers: { authorization: "Token bad" } })).status, 401);
  const scen = (await (await fetch(`${api}/scenarios?teamId=7`, { headers: auth })).json()) as {
    scenarios: { id: number }[];
  };
  t.same(
    scen.scenarios.map((s) => s.id),
    [102, 101],
    "as Make: by id, descending",
  );
  await control(sim.url, "logs", { scenarioId: 101, count: 2, status: 3 });
  const logs = (await (
    await fetch(`${api}/scenarios/101/logs?from=0&to=${Date.now() + 1000}`, { headers: auth })
  ).json()) as { scenarioLogs: { status: number }[] };
  t.same(
    logs.scenarioLogs.map((l) => l.status),
    [3, 3],
  );
  const none = (await (
    await fetch(`${api}/scenarios/101/logs?from=${Date.now() + 60_000}`, { headers: auth })
  ).json()) as { scenarioLogs: unknown[] };
  t.same(none.scenarioLogs, [], "the window bounds the logs");
});

t.test("gateway: heartbeats with token usage reach Vigil; a stopped daemon sends nothing", async (t) => {
  const ta = await testApp(t);
  const w = await seedTenants(ta);
  const url = await ta.app.listen({ host: "127.0.0.1", port: 0 });
  const sim = await startGatewaySim({ vigilUrl: url, keys: [w.keys.ingest], intervalMs: 60_000 });
  t.teardown(() => sim.close());
  await sim.beat();
  t.equal(sim.daemon.acknowledged, 1, sim.daemon.lastError ?? "");
  await control(sim.url, "gateway", { sending: false });
  await sim.beat();
  t.equal(sim.daemon.sent, 1, "a stopped daemon sends nothing");
  await ta.ctx.stores.series.waitVisible();
  const rows = await ta.ctx.stores.series.page(gatewayHeartbeats, { limit: 5 });
  t.equal(rows.rows.length, 1);
  t.ok((rows.rows[0]?.input_tokens ?? 0) > 0, "with token usage");
});

t.test("vigil sim as a process", async (t) => {
  const run = spawnVigil(t, ["sim", "workflow_a", "--port", "0", "--api-key", "zz"]);
  const m = await run.waitFor(/"url":"(http:\/\/127\.0\.0\.1:\d+)"/);
  t.equal((await fetch(`${m[1]}/api/v1/workflows`, { headers: { "X-N8N-API-KEY": "zz" } })).status, 200);
  run.proc.kill("SIGTERM");
  t.equal((await run.exited()).code, 0);
  const bad = spawnVigil(t, ["sim", "zapier"]);
  t.equal((await bad.exited()).code, 2);
  t.match(bad.output(), /unknown kind "zapier"/);
});
