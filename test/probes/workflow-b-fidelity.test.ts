import http from "node:http";
import type { AddressInfo } from "node:net";
import t, { type Test } from "tap";
import { upsertWorkflowNames } from "../../src/executions/repository.js";
import { createProbeAgent } from "../../src/probes/http.js";
import type { SyncBudget, SyncState } from "../../src/probes/platform.js";
import { runCheck } from "../../src/probes/platforms.js";
import { syncExecutions } from "../../src/probes/sync.js";
import { ProbeWorker } from "../../src/probes/worker.js";
import { startWorkflowB } from "../../src/sim/workflow-b.js";
import { executions } from "../../src/stores/series/tables.js";
import { testApp } from "../helpers/app.js";
import { call, seedTenants } from "../helpers/tenants.js";

/**
 * workflow_b against a simulator that follows Make's API documentation (src/sim/workflow-b.ts):
 * scenario and log pagination, names, failure reasons, the per-organization rate limit. Each
 * test fails on the adapter before #18 (one unpaged request per list, no back-off, no names);
 * those after "#18 review" fail on the adapter the review found wanting.
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
  const tick = async (budget?: SyncBudget, o: { lastSyncAt?: Date; deadlineMs?: number } = {}) => {
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
        lastSyncAt: o.lastSyncAt ?? null,
      },
      2000,
      budget,
      o.deadlineMs,
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

t.test(
  "#18 review: past 800 scenarios the listing goes on over ticks and logs are read meanwhile",
  async (t) => {
    const { sim, tick, stored, state } = await setup(t);
    await control(sim.url, "scenarios", { count: 818 }); // 820 in all: 103..920, listed newest first
    await control(sim.url, "logs", { scenarioId: 920, count: 2, status: 1 }); // the first listed
    await control(sim.url, "logs", { scenarioId: 101, count: 3, status: 1 }); // the last, past 8 pages
    const first = await tick();
    t.ok(first.requests <= 8, `${first.requests} requests`);
    t.equal((await stored()).length, 2, "logs are read in the tick that starts the listing");
    t.ok(state().b?.listing, "the listing's place is kept");
    for (let i = 0; i < 2; i++) await tick();
    t.equal(state().b?.ids?.length, 820, "the listing completes");
    t.notOk(state().b?.listing);
    // 820 scenarios at up to 8 a tick: the round takes about a hundred ticks.
    for (let i = 0; i < 150 && (await stored()).length < 5; i++) await tick();
    t.equal((await stored()).length, 5, "the last scenario's logs arrive once the round reaches it");
  },
);

t.test("#18 review: a scenario whose logs fail does not hold up the others, and is set aside", async (t) => {
  const { sim, tick, stored, state } = await setup(t);
  await control(sim.url, "scenarios/102", { logsStatus: 403 }, "PATCH"); // visited first
  await control(sim.url, "logs", { scenarioId: 101, count: 2, status: 1 });
  await tick();
  t.equal((await stored()).length, 2, "the next scenario is read");
  await tick();
  await tick();
  const aside = state().b?.scenario?.["102"] as { fails?: number; asideUntil?: number } | undefined;
  t.equal(aside?.fails, 3);
  t.ok((aside?.asideUntil ?? 0) > Date.now(), "set aside after three failures in a row");
  const quiet = await tick();
  t.equal(quiet.requests, 1, "only the other scenario is asked while it is set aside");
  await control(sim.url, "logs", { scenarioId: 101, count: 1, status: 1 });
  await tick();
  t.equal((await stored()).length, 3);
});

t.test("#18 review: a quiet scenario keeps its position: runs are not lost in a long round", async (t) => {
  const { sim, ta, tick, stored } = await setup(t);
  await tick(); // both scenarios visited, no logs yet
  await control(sim.url, "logs", { scenarioId: 102, count: 1, status: 1 });
  // The round comes back to it 50 minutes later; the last sync was a minute ago.
  const later = Date.now() + 50 * 60_000;
  ta.ctx.now = () => new Date(later);
  await tick(undefined, { lastSyncAt: new Date(later - 60_000) });
  t.equal((await stored()).length, 1, "the run written after the quiet visit is read");
});

t.test("#18 review: while Make's Retry-After holds, last_sync_at does not move", async (t) => {
  const { sim, ta, id } = await setup(t);
  await control(sim.url, "ratelimit", { perMinute: 1, retryAfter: 120 }); // the check passes, the sync gets 429
  const worker = new ProbeWorker(ta.ctx, { timeoutMs: 2000 });
  t.teardown(() => worker.stop());
  const lastSync = async () =>
    (
      await ta.ctx.stores.db.query<{ last_sync_at: Date | null; sync_state: SyncState }>(
        "SELECT last_sync_at, sync_state FROM connections WHERE id = $1",
        [id],
      )
    ).rows[0];
  const slot = async () => {
    await ta.ctx.stores.db.query(
      "UPDATE connections SET next_check_at = now(), last_sync_at = last_sync_at - interval '61 seconds' WHERE id = $1",
      [id],
    );
    await worker.tick();
    await worker.idle();
  };
  await slot();
  const held = await lastSync();
  t.ok(held?.sync_state.backoffUntil, "held off");
  await slot(); // the check answers (429 is up); the sync asks nothing
  const after = await lastSync();
  t.equal(
    after?.last_sync_at?.getTime(),
    (held?.last_sync_at?.getTime() ?? 0) - 61_000,
    "nothing was synced: last_sync_at stays",
  );
  t.equal(after?.sync_state.backoffUntil, held?.sync_state.backoffUntil, "and the state with it");
});

t.test("#18 review: a reason read from the details is kept, and one owed waits for budget", async (t) => {
  const { sim, ta, w, id, tick } = await setup(t);
  await control(sim.url, "logs", {
    scenarioId: 101,
    count: 1,
    status: 3,
    errorInLog: false, // the log row has no error object; the execution details have it
    error: {
      name: "DataError",
      message: "Invalid IBAN in bundle 3",
      causeModule: { name: "bank:CreatePayment", appName: "bank" },
    },
  });
  await control(sim.url, "logs", { scenarioId: 102, count: 1, status: 1 });
  const small = { pages: 2, reReads: 0, details: 5, names: 0 }; // logs take the whole budget
  const failed = async () =>
    (
      await call(
        ta.app,
        w.keys.alicePersonal,
        "GET",
        `/v1/executions?connection_id=${id}&include_error_details=true&status=error`,
      )
    ).json().data as Record<string, unknown>[];
  for (let i = 0; i < 4; i++) await tick(small);
  t.match(await failed(), [{ error: "Invalid IBAN in bundle 3", error_node: "bank:CreatePayment" }]);
  for (let i = 0; i < 4; i++) await tick(small); // the log is read again in the 45-minute overlap
  t.match(
    await failed(),
    [{ error: "Invalid IBAN in bundle 3", error_node: "bank:CreatePayment" }],
    "not overwritten by the log's generic reason",
  );
});

/** A Make answering whatever `answer` says: for answers no real Make should give. */
async function fakeMake(t: Test, answer: (url: URL) => string) {
  const server = http.createServer((req, res) => {
    const body = answer(new URL(req.url ?? "/", "http://fake"));
    res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
    res.end(body);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  server.on("connection", (s) => t.teardown(() => s.destroy()));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

t.test("#18 review: odd Make answers are skipped and never stop the sync", async (t) => {
  const now = Date.now();
  const log = (id: string, ms: number, extra: Record<string, unknown> = {}) => ({
    id,
    imtId: `${ms}_scenario.7.auto.${id}`,
    timestamp: new Date(ms).toISOString(),
    duration: 5,
    status: 1,
    type: "auto",
    ...extra,
  });
  const logs: unknown[] = [
    null,
    5,
    log("far", Date.parse("2200-01-01T00:00:00Z")), // a far-future imtId
    log("huge", now - 60_000, { duration: 1e308, status: 3 }),
    log("odd", now - 50_000, { status: "constructor" }),
  ];
  const url = await fakeMake(t, (u) => {
    if (u.pathname.endsWith("/scenarios"))
      return JSON.stringify({ scenarios: [null, 5, { id: 7, name: "Odd" }] });
    if (u.pathname.endsWith("/logs")) {
      const from = Number(u.searchParams.get("from"));
      const to = Number(u.searchParams.get("to"));
      return JSON.stringify({
        scenarioLogs: logs.filter((l) => {
          const ts = Date.parse(String((l as { timestamp?: unknown } | null)?.timestamp));
          return !Number.isFinite(ts) || (ts >= from && ts <= to);
        }),
      });
    }
    return "null"; // execution details: a JSON null
  });
  const ta = await testApp(t, { env: { WORKFLOW_B_API_TEMPLATE: `${url}/{region}/api/v2` } });
  const w = await seedTenants(ta);
  const r = await call(ta.app, w.keys.alicePersonal, "POST", "/v1/connections", {
    service_type: "workflow_b",
    service_name: "odd",
    api_token: "tok",
    region: "eu1",
    team_id: "7",
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
        serviceType: "workflow_b",
        baseUrl: null,
        apiKey: null,
        apiToken: "tok",
        region: "eu1",
        teamId: "7",
        state,
        lastSyncAt: null,
      },
      2000,
    );
    state = out.state;
    await ta.ctx.stores.series.waitVisible();
  };
  const rows = async () =>
    (
      await ta.ctx.stores.series.page(executions, {
        where: [{ column: "connection_id", op: "eq", value: id }],
        limit: 100,
      })
    ).rows;
  await tick();
  let by = new Map((await rows()).map((x) => [x.execution_id, x]));
  t.equal(by.get("huge")?.status, "error");
  t.equal(by.get("huge")?.duration_ms, null, "an impossible duration is no duration");
  t.equal(by.get("odd")?.status, "unknown");
  t.notOk(by.has("far"), "a start a century ahead is not a start");
  logs.push(log("later", Date.now()));
  ta.ctx.now = () => new Date(Date.now() + 1000);
  await tick();
  by = new Map((await rows()).map((x) => [x.execution_id, x]));
  t.ok(by.has("later"), "runs after the odd ones are still read");
});

t.test("#18 review: a Make tick stops starting requests at its deadline", async (t) => {
  const { sim, tick, stored } = await setup(t);
  await control(sim.url, "scenarios", { count: 6 });
  for (const s of [101, 102, 103, 104, 105, 106, 107, 108])
    await control(sim.url, "logs", { scenarioId: s, count: 1, status: 1 });
  await control(sim.url, "state", { latencyMs: 100 });
  const out = await tick(undefined, { deadlineMs: 250 });
  t.equal(out.stoppedBy, "deadline");
  t.ok(out.requests <= 3, `${out.requests} requests of ~100 ms in 250 ms`);
  await control(sim.url, "state", { latencyMs: 0 });
  for (let i = 0; i < 3; i++) await tick();
  t.equal((await stored()).length, 8, "the next ticks go on");
});

t.test(
  "#18 review: the same workflow named twice in one batch is stored once, the last name winning",
  async (t) => {
    const { ta, id } = await setup(t);
    const at = new Date();
    await upsertWorkflowNames(
      ta.ctx.stores.db,
      id,
      [
        { workflowId: "7", name: "Old" },
        { workflowId: "8", name: "Other" },
        { workflowId: "7", name: "New" },
      ],
      at,
    );
    const named = await ta.ctx.stores.db.query<{ workflow_id: string; name: string }>(
      "SELECT workflow_id, name FROM workflow_names WHERE connection_id = $1 ORDER BY workflow_id",
      [id],
    );
    t.same(named.rows, [
      { workflow_id: "7", name: "New" },
      { workflow_id: "8", name: "Other" },
    ]);
  },
);
