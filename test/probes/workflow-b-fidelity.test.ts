import t, { type Test } from "tap";
import { createProbeAgent } from "../../src/probes/http.js";
import type { SyncBudget, SyncState } from "../../src/probes/platform.js";
import { runCheck } from "../../src/probes/platforms.js";
import { syncExecutions } from "../../src/probes/sync.js";
import { startWorkflowB } from "../../src/sim/workflow-b.js";
import { executions } from "../../src/stores/series/tables.js";
import { testApp } from "../helpers/app.js";
import { call, seedTenants } from "../helpers/tenants.js";

/**
 * workflow_b against a simulator that follows Make's API documentation (src/sim/workflow-b.ts):
 * scenario and log pagination, names, failure reasons, the per-organization rate limit. Each
 * test fails on the adapter before #18 (one unpaged request per list, no back-off, no names).
 */

const control = (url: string, path: string, body: unknown, method = "POST") =>
  fetch(`${url}/__sim/${path}`, {
    method,
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });

async function setup(t: Test, opts: { rateLimitPerMinute?: number } = {}) {
  const sim = await startWorkflowB({
    apiToken: "tok",
    teamId: "7",
    rateLimitPerMinute: opts.rateLimitPerMinute ?? 0,
  });
  t.teardown(() => sim.close());
  const ta = await testApp(t, { env: { WORKFLOW_B_API_TEMPLATE: `${sim.url}/{region}/api/v2` } });
  const w = await seedTenants(ta);
  const r = await call(ta.app, w.keys.alicePersonal, "POST", "/v1/connections", {
    service_type: "workflow_b",
    service_name: "make",
    api_token: "tok",
    region: "eu2",
    team_id: "7",
  });
  const id = r.json().connection.id as string;
  const agent = createProbeAgent();
  t.teardown(() => agent.close());
  let state: SyncState = {};
  const tick = async (budget?: SyncBudget) => {
    const out = await syncExecutions(
      ta.ctx,
      agent,
      {
        id,
        serviceType: "workflow_b",
        baseUrl: null,
        apiKey: null,
        apiToken: "tok",
        region: "eu2",
        teamId: "7",
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
  const stored = async () =>
    (
      await ta.ctx.stores.series.page(executions, {
        where: [{ column: "connection_id", op: "eq", value: id }],
        limit: 5000,
      })
    ).rows;
  return { sim, ta, w, id, tick, stored, state: () => state };
}

t.test("every log of every scenario: scenario pages of 100, log pages of 50 by imtId", async (t) => {
  const { sim, tick, stored } = await setup(t);
  await control(sim.url, "scenarios", { count: 12, name: "Lead router" }); // 14 scenarios: past Make's default page of 10
  await control(sim.url, "logs", { scenarioId: 101, count: 120, status: 1 }); // past a page of 50
  const last = sim.scenarios[sim.scenarios.length - 1] as { id: number };
  await control(sim.url, "logs", { scenarioId: last.id, count: 3, status: 3 });
  let out;
  for (let i = 0; i < 5; i++) out = await tick();
  t.equal(out?.stoppedBy, null);
  const rows = await stored();
  t.equal(rows.length, 123, "all 120 logs of one scenario and the 3 of the fourteenth");
  t.equal(new Set(rows.map((r) => r.execution_id)).size, 123, "keyed by Make's execution id, once each");
  await control(sim.url, "logs", { scenarioId: 101, count: 2, status: 1 });
  for (let i = 0; i < 5; i++) await tick();
  t.equal((await stored()).length, 125, "later ticks add only what is new");
});

t.test("failure reasons come from Make's error object; scenarios carry their names", async (t) => {
  const { sim, ta, w, id, tick } = await setup(t);
  await control(sim.url, "scenarios/102", { name: "Invoice sync" }, "PATCH");
  await control(sim.url, "logs", {
    scenarioId: 102,
    count: 1,
    status: 3,
    error: {
      name: "DataError",
      message: "Invalid IBAN in bundle 3",
      causeModule: { name: "bank:CreatePayment", appName: "bank" },
    },
  });
  await tick();
  await tick();
  const res = await call(
    ta.app,
    w.keys.alicePersonal,
    "GET",
    `/v1/executions?connection_id=${id}&include_error_details=true`,
  );
  t.match(res.json().data[0], {
    workflow_id: "102",
    workflow_name: "Invoice sync",
    status: "error",
    error: "Invalid IBAN in bundle 3",
    error_node: "bank:CreatePayment",
  });
});

t.test("a log without an error object gets its reason from the execution's details", async (t) => {
  const { sim, ta, w, id, tick } = await setup(t);
  await control(sim.url, "logs", { scenarioId: 101, count: 1, status: 3, error: null });
  await tick();
  await tick();
  const res = await call(
    ta.app,
    w.keys.alicePersonal,
    "GET",
    `/v1/executions?connection_id=${id}&include_error_details=true&status=error`,
  );
  // With `error: null` the log row has none; the execution details carry the simulator's default failure.
  t.equal(res.json().data.length, 1);
  t.equal(res.json().data[0].error, "scenario run ended with an error", "Make gave no reason: said so");
});

t.test("Make's per-organization rate limit: the sync stops at 429, waits, and resumes", async (t) => {
  const { sim, ta, tick, stored, state } = await setup(t, { rateLimitPerMinute: 3 });
  await control(sim.url, "logs", { scenarioId: 101, count: 60, status: 1 });
  await control(sim.url, "logs", { scenarioId: 102, count: 5, status: 1 });
  const first = await tick();
  t.equal(first.stoppedBy, "HTTP 429", "stopped at the first 429");
  t.ok(state().backoffUntil, "and holds off");
  const held = Date.parse(state().backoffUntil as string) - ta.ctx.now().getTime();
  t.ok(held >= 55_000 && held <= 60_000, "a minute without Retry-After (Make sends none)");
  const quiet = await tick();
  t.equal(quiet.requests, 0, "no request while held off");

  await control(sim.url, "ratelimit", { perMinute: 0 });
  ta.ctx.now = () => new Date(Date.now() + 61_000); // the minute has passed
  for (let i = 0; i < 5; i++) await tick();
  t.equal((await stored()).length, 65, "everything arrives once the platform lets us");
});

t.test("Retry-After is honoured when Make sends one; a 429 check is not an outage", async (t) => {
  const { sim, ta, tick, state } = await setup(t, { rateLimitPerMinute: 1 });
  await control(sim.url, "ratelimit", { perMinute: 1, retryAfter: 120 });
  await tick();
  const held = Date.parse(state().backoffUntil as string) - ta.ctx.now().getTime();
  t.ok(held > 110_000 && held <= 120_000, "120 s as asked");
  const agent = createProbeAgent();
  t.teardown(() => agent.close());
  const check = await runCheck(
    agent,
    { serviceType: "workflow_b", baseUrl: null, apiKey: null, apiToken: "tok", region: "eu2" },
    { timeoutMs: 2000, workflowBApiTemplate: `${sim.url}/{region}/api/v2` },
  );
  t.equal(check.available, true, "Make answered: it is up, only busy");
  t.equal(check.statusCode, 429);
});

t.test("the sync budget spreads a large account over ticks, never past it", async (t) => {
  const { sim, tick, stored } = await setup(t);
  await control(sim.url, "logs", { scenarioId: 101, count: 130, status: 1 });
  await control(sim.url, "logs", { scenarioId: 102, count: 10, status: 1 });
  const small = { pages: 2, reReads: 0, details: 0, names: 0 };
  const counts: number[] = [];
  for (let i = 0; i < 4; i++) {
    const out = await tick(small);
    t.ok(out.requests <= 2, `tick ${i + 1}: ${out.requests} requests, within the budget`);
    counts.push((await stored()).length);
  }
  t.ok((counts[0] as number) < 140, "not everything in one tick");
  t.equal(counts[3], 140, "everything after a few");
});
