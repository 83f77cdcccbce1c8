import { Writable } from "node:stream";
import t from "tap";
import { heartbeatRepeats, PeriodlessRepeats } from "../../src/ingest/repeats.js";
import { createQuestdbSeriesStore } from "../../src/stores/series/questdb.js";
import {
  availabilitySamples,
  gatewayHeartbeats,
  gatewayModelUsage,
  usageEntries,
} from "../../src/stores/series/tables.js";
import { testApp } from "../helpers/app.js";
import { type BackendName, freshSeries, requireBackend, TEST_QUESTDB_URL } from "../helpers/backends.js";
import { pausableProxy } from "../helpers/proxy.js";
import { call, seedTenants } from "../helpers/tenants.js";

const heartbeat = (
  over: Record<string, unknown> = {},
  start = "2026-11-20T10:00:00Z",
  end = "2026-11-20T10:01:00Z",
) => ({
  type: "heartbeat",
  gateway: { status: "healthy", latencyMs: 42, version: "2.4.1" },
  system: { gatewayPidAlive: true, loadAvg: [0.5] },
  tokens: {
    period: {
      inputTokens: 3000,
      outputTokens: 1000,
      cacheReadTokens: 200,
      cacheWriteTokens: 0,
      requestCount: 12,
      estimatedCostUsd: 0.5,
      startedAt: start,
      endedAt: end,
    },
    byModel: [
      { model: "claude-sonnet-4-5", inputTokens: 2000, outputTokens: 600 },
      { model: "gpt-4o", inputTokens: 900, outputTokens: 300, estimatedCostUsd: 0.01 },
      { model: "my-local-llama", inputTokens: 100, outputTokens: 100 },
    ],
  },
  ...over,
});

for (const series of ["pglite", "questdb"] as BackendName[]) {
  t.test(`heartbeat ingest on ${series}`, async (t) => {
    if (!(await requireBackend(t, series))) return;
    const ta = await testApp(t, { series });
    const { app, ctx } = ta;
    const w = await seedTenants(ta);
    const ingest = w.keys.ingest;
    const OB = w.conns.OB;
    const send = (body: unknown, key = ingest) => call(app, key, "POST", "/v1/gateway/ingest", body);
    // the service's clock, shortly after the periods below end
    ctx.now = () => new Date("2026-11-20T10:05:00Z");

    const first = await send(heartbeat());
    t.equal(first.statusCode, 201, first.body);
    t.match(first.json(), { message: "Heartbeat recorded", heartbeat_id: /^hb_[0-9a-f]{32}$/ });
    const id = first.json().heartbeat_id;
    t.equal(
      (await call(app, w.keys.bobOrgB, "GET", `/v1/connections/${OB}`)).json().status,
      "active",
      "the connection turns active",
    );

    // idempotent: resends, also concurrent ones, return the same id and count nothing twice
    const again = await Promise.all(Array.from({ length: 5 }, () => send(heartbeat())));
    t.same(new Set(again.map((r) => r.json().heartbeat_id)), new Set([id]));
    await ctx.stores.series.waitVisible();
    const where = [{ column: "connection_id", op: "eq" as const, value: OB }];
    t.equal(await ctx.stores.series.count(gatewayHeartbeats, { where }), 1, "one heartbeat row");
    t.equal(await ctx.stores.series.count(gatewayModelUsage, { where }), 3, "one row per model");
    const sample = (await ctx.stores.series.page(availabilitySamples, { where, limit: 5 })).rows;
    t.equal(sample.length, 1, "one availability sample");
    t.match(sample[0], { available: true, response_time_ms: 42, source: "heartbeat", synthetic: false });

    const models = (await ctx.stores.series.page(gatewayModelUsage, { where, limit: 5 })).rows;
    const byName = Object.fromEntries(models.map((m) => [m.model, m]));
    t.equal(byName["claude-sonnet-4-5"]?.cost_source, "priced");
    t.ok(
      Math.abs((byName["claude-sonnet-4-5"]?.cost_usd ?? 0) - (2000 * 3 + 600 * 15) / 1e6) < 1e-12,
      "priced from the table",
    );
    t.equal(byName["gpt-4o"]?.cost_source, "reported");
    t.equal(byName["gpt-4o"]?.cost_usd, 0.01);
    t.match(byName["my-local-llama"], { cost_source: "unpriced", cost_usd: 0 });

    // a second period adds; an unhealthy one is an unavailable sample
    const second = await send(
      heartbeat(
        { gateway: { status: "degraded", latencyMs: 900, version: "2.4.1" } },
        "2026-11-20T10:01:00Z",
        "2026-11-20T10:02:00Z",
      ),
    );
    t.equal(second.statusCode, 201);
    t.not(second.json().heartbeat_id, id);
    const noPeriod = {
      type: "heartbeat",
      gateway: { status: "healthy", latencyMs: 5, version: "2.4.1" },
      system: { gatewayPidAlive: false },
    };
    // a period-less heartbeat: a resend within the repeat window is the same heartbeat, even
    // across a second boundary, concurrently, or after a restart (a fresh in-memory window)
    let clock = Date.parse("2026-11-21T08:00:00.900Z");
    ctx.now = () => new Date(clock);
    const third = await send(noPeriod);
    t.equal(third.statusCode, 201);
    const thirdId = third.json().heartbeat_id;
    clock += 400; // the next second
    const resent = await Promise.all([send(noPeriod), send(noPeriod)]);
    t.same(
      resent.map((r) => r.json().heartbeat_id),
      [thirdId, thirdId],
      "a period-less heartbeat is recognised by its body",
    );
    await ctx.stores.series.waitVisible();
    heartbeatRepeats.set(ctx, new PeriodlessRepeats(() => ctx.stores.series));
    clock += 30_000;
    t.equal((await send(noPeriod)).json().heartbeat_id, thirdId, "and after a restart, from the store");
    await ctx.stores.series.waitVisible();
    const samples = (await ctx.stores.series.page(availabilitySamples, { where, limit: 10 })).rows;
    t.same(samples.map((s) => s.reason ?? null).sort(), [null, "gateway_unhealthy", "process_down"].sort());

    // the same body after the window is a new heartbeat: a health-only daemon repeats itself
    clock += 61_000;
    const later = await send(noPeriod);
    t.not(later.json().heartbeat_id, thirdId, "the same body later is a new heartbeat");
    await ctx.stores.series.waitVisible();
    t.equal(
      await ctx.stores.series.count(availabilitySamples, { where }),
      4,
      "one more sample, not one per resend",
    );

    // a heartbeat whose period ended days ago counts its tokens but adds no availability sample
    const late = await send(heartbeat({}, "2026-11-19T09:00:00Z", "2026-11-19T09:01:00Z"));
    t.equal(late.statusCode, 201, late.body);
    await ctx.stores.series.waitVisible();
    t.equal(await ctx.stores.series.count(availabilitySamples, { where }), 4, "no sample for a late period");
    ctx.now = () => new Date();

    // totals in one unit (cents), heartbeat dollars included; unpriced models flagged
    const totals = await call(
      app,
      w.keys.bobOrgB,
      "PUT",
      `/v1/usage?connection_id=${OB}&start_date=2026-11-01T00:00:00Z&end_date=2026-11-30T00:00:00Z`,
    );
    t.equal(totals.statusCode, 200, totals.body);
    const b = totals.json();
    t.equal(b.gateway.heartbeats, 5, "three periods and two period-less heartbeats");
    t.equal(b.gateway.input_tokens, 9000);
    t.equal(b.totals.tokens, 12000);
    t.ok(
      Math.abs(b.totals.cost_cents - 150) < 1e-6,
      `three periods at $0.50 are 150 cents, got ${b.totals.cost_cents}`,
    );
    t.same(b.unpriced_models, ["my-local-llama"]);

    // who may send
    for (const [name, key] of [
      ["personal key", w.keys.bobPersonal],
      ["organization key", w.keys.bobOrgB],
    ] as const) {
      const r = await send(heartbeat(), key);
      t.equal(r.statusCode, 403, name);
      t.same(r.json(), { error: "This endpoint only accepts a key with role usage-ingestion." });
    }
    t.equal((await send(heartbeat(), null as unknown as string)).statusCode, 401);
  });
}

t.test("heartbeat bad input: 4xx naming the field, nothing stored", async (t) => {
  const ta = await testApp(t);
  const w = await seedTenants(ta);
  const send = (body: unknown) => call(ta.app, w.keys.ingest, "POST", "/v1/gateway/ingest", body);
  const hb = heartbeat();
  const cases: [string, unknown, RegExp][] = [
    ["unknown type", { ...hb, type: "ping" }, /^body\.type: must be "heartbeat"$/],
    ["missing gateway", { type: "heartbeat" }, /^body\.gateway: /],
    [
      "latency a string",
      { ...hb, gateway: { status: "healthy", latencyMs: "42", version: "1" } },
      /^body\.gateway\.latencyMs: must be a number/,
    ],
    [
      "negative tokens",
      { ...hb, tokens: { period: { ...hb.tokens.period, inputTokens: -1 } } },
      /^body\.tokens\.period\.inputTokens: must be 0 or more/,
    ],
    [
      "fractional tokens",
      { ...hb, tokens: { period: { ...hb.tokens.period, outputTokens: 1.5 } } },
      /outputTokens: must be a whole number/,
    ],
    [
      "bad timestamp",
      { ...hb, tokens: { period: { ...hb.tokens.period, startedAt: "yesterday" } } },
      /^body\.tokens\.period\.startedAt: must be an ISO 8601/,
    ],
    [
      "end before start",
      { ...hb, tokens: { period: { ...hb.tokens.period, endedAt: "2026-11-20T09:00:00Z" } } },
      /endedAt: must not be before startedAt/,
    ],
    [
      "byModel not an array",
      { ...hb, tokens: { ...hb.tokens, byModel: { model: "x" } } },
      /^body\.tokens\.byModel: must be an array/,
    ],
    [
      "future period",
      {
        ...hb,
        tokens: {
          period: { ...hb.tokens.period, startedAt: "2099-01-01T00:00:00Z", endedAt: "2099-01-01T00:01:00Z" },
        },
      },
      /endedAt: is in the future/,
    ],
  ];
  for (const [name, body, message] of cases) {
    const r = await send(body);
    t.equal(r.statusCode, 400, name);
    t.match(r.json().error, message, name);
  }
  const malformed = await ta.app.inject({
    method: "POST",
    url: "/v1/gateway/ingest",
    headers: { authorization: `Bearer ${w.keys.ingest}`, "content-type": "application/json" },
    payload: "{nope",
  });
  t.equal(malformed.statusCode, 400);
  t.match(
    malformed.json(),
    { error: /^body: malformed JSON/ },
    "malformed JSON is named, in the {error} style",
  );
  const big = await send({ ...hb, system: { blob: "x".repeat(70_000) } });
  t.equal(big.statusCode, 413);
  t.same(big.json(), { error: "Payload too large: at most 65536 bytes." });
  await ta.ctx.stores.series.waitVisible();
  t.equal(
    await ta.ctx.stores.series.count(gatewayHeartbeats, {}),
    0,
    "nothing stored from rejected requests",
  );

  // the ingestion key stops with its connection
  t.equal((await call(ta.app, w.keys.bobOrgB, "DELETE", `/v1/connections/${w.conns.OB}`)).statusCode, 200);
  t.equal((await send(hb)).statusCode, 401);
});

t.test("QuestDB unreachable: 503, nothing acknowledged", async (t) => {
  const down = await createQuestdbSeriesStore({
    httpUrl: "http://127.0.0.1:1",
    pgUrl: "postgres://admin:quest@127.0.0.1:1/qdb",
    requestTimeoutMs: 500,
  });
  t.teardown(() => down.close());
  const ta = await testApp(t, { seriesStore: down });
  const w = await seedTenants(ta);
  const r = await call(ta.app, w.keys.ingest, "POST", "/v1/gateway/ingest", heartbeat());
  t.equal(r.statusCode, 503);
  t.match(r.json(), { error: /unavailable; nothing was stored/ });
  t.equal(r.headers["retry-after"], "5");
  const u = await call(ta.app, w.keys.alicePersonal, "POST", "/v1/usage", {
    connection_id: w.conns.PA,
    entity: "x",
    usage_amount: 1,
  });
  t.equal(u.statusCode, 503);
  t.equal(u.json().error.code, "SERVICE_UNAVAILABLE");
});

t.test(
  "a stalled QuestDB: ingest sheds with 503 past the backlog limit, stores nothing refused, recovers",
  async (t) => {
    if (!(await requireBackend(t, "questdb"))) return;
    const proxy = await pausableProxy(TEST_QUESTDB_URL as string);
    t.teardown(() => proxy.close());
    const series = await freshSeries(t, "questdb", { questdbHttpUrl: proxy.url });
    const warnings: string[] = [];
    const logTo = new Writable({
      write(chunk, _enc, done) {
        for (const l of chunk.toString().split("\n")) if (l) warnings.push(JSON.parse(l).msg);
        done();
      },
    });
    const ta = await testApp(t, {
      seriesStore: series,
      env: { INGEST_MAX_BACKLOG_ROWS: "100", LOG_LEVEL: "warn" },
      logTo,
    });
    const w = await seedTenants(ta);
    const entry = (n: number) => ({ connection_id: w.conns.PA, entity: `run-${n}`, usage_amount: n });
    const hb = heartbeat({}, "2026-11-20T10:00:00Z", "2026-11-20T10:01:00Z");

    proxy.pause();
    // 100 rows reach the store and wait there: the backlog is at its limit.
    const first = call(ta.app, w.keys.alicePersonal, "POST", "/v1/usage", [...Array(100).keys()].map(entry));
    for (let i = 0; i < 200 && series.backlog() < 100; i++) await new Promise((r) => setTimeout(r, 10));
    t.equal(series.backlog(), 100, "the first batch is waiting on the stalled store");

    const shedHb = await call(ta.app, w.keys.ingest, "POST", "/v1/gateway/ingest", hb);
    t.equal(shedHb.statusCode, 503, "heartbeat refused");
    t.equal(shedHb.headers["retry-after"], "1");
    t.match(shedHb.json(), {
      error: /behind on writes \(100 rows waiting.*limit 100\); nothing was stored\. Retry in 1 s\./,
    });
    for (let i = 0; i < 3; i++) await call(ta.app, w.keys.ingest, "POST", "/v1/gateway/ingest", hb);
    t.equal(
      warnings.filter((m) => /ingest backlog full/.test(m)).length,
      1,
      "four refusals within a second log one warning",
    );
    const shedUsage = await call(ta.app, w.keys.alicePersonal, "POST", "/v1/usage", entry(1000));
    t.equal(shedUsage.statusCode, 503, "usage refused");
    t.match(shedUsage.json(), {
      success: false,
      error: { code: "SERVICE_UNAVAILABLE", details: { backlog_rows: 100, limit: 100, retry_after: 1 } },
    });
    t.equal(
      shedUsage.headers["x-ratelimit-remaining"],
      undefined,
      "a refused request takes no rate-limit quota",
    );
    // (another account's key, so alice's quota below counts only her own requests)
    const read = await call(ta.app, w.keys.bobPersonal, "GET", "/v1/usage");
    t.equal(read.statusCode, 200, "reads go on while ingest sheds");

    proxy.resume();
    const done = await first;
    t.equal(done.statusCode, 201, "the waiting batch is acknowledged once the store answers");
    const remaining = Number(done.headers["x-ratelimit-remaining"]);
    t.equal(series.backlog(), 0);

    const again = await call(ta.app, w.keys.alicePersonal, "POST", "/v1/usage", entry(2000));
    t.equal(again.statusCode, 201, "ingest is back by itself");
    t.equal(
      Number(again.headers["x-ratelimit-remaining"]),
      remaining - 1,
      "the refused request used no quota",
    );
    t.equal((await call(ta.app, w.keys.ingest, "POST", "/v1/gateway/ingest", hb)).statusCode, 201);

    await series.waitVisible();
    t.equal(
      await series.count(usageEntries, {}),
      101,
      "the 100 + 1 acknowledged entries, not the refused one",
    );
    t.equal(await series.count(gatewayHeartbeats, {}), 1, "one heartbeat: the acknowledged one");
  },
);

t.test("usage totals report money without float noise (heartbeat dollars + entry cents)", async (t) => {
  const ta = await testApp(t);
  const w = await seedTenants(ta);
  const now = Date.now();
  const period = {
    inputTokens: 1000,
    outputTokens: 200,
    estimatedCostUsd: 0.006,
    startedAt: new Date(now - 120_000).toISOString(),
    endedAt: new Date(now - 60_000).toISOString(),
  };
  const hb = {
    type: "heartbeat",
    gateway: { status: "healthy", latencyMs: 5, version: "1" },
    tokens: { period },
  };
  t.equal((await call(ta.app, w.keys.ingest, "POST", "/v1/gateway/ingest", hb)).statusCode, 201);
  const entries = [0.1, 0.2, 2.7].map((c, i) => ({
    connection_id: w.conns.OB,
    entity: "wf",
    usage_amount: 1,
    cost_cents: c,
    workflow_id: `w${i}`,
  }));
  t.equal((await call(ta.app, w.keys.bobOrgB, "POST", "/v1/usage", entries)).statusCode, 201);
  await ta.ctx.stores.series.waitVisible();
  const r = await call(ta.app, w.keys.bobOrgB, "PUT", `/v1/usage?connection_id=${w.conns.OB}`);
  t.equal(r.statusCode, 200);
  const body = r.json();
  t.same(body.totals, { entries: 3, heartbeats: 1, tokens: 1203, cost_cents: 3.6, cost_usd: 0.036 });
  t.equal(body.by_entity[0].cost_cents, 3, "0.1 + 0.2 + 2.7 cents sum to exactly 3");
  t.equal(body.gateway.cost_cents, 0.6);
});
