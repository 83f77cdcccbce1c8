import t from "tap";
import { type BackendName, requireBackend } from "../helpers/backends.js";
import { testApp } from "../helpers/app.js";
import { call, seedTenants } from "../helpers/tenants.js";

for (const series of ["pglite", "questdb"] as BackendName[]) {
  t.test(`usage API on ${series}`, async (t) => {
    if (!(await requireBackend(t, series))) return;
    const ta = await testApp(t, { series });
    const { app, ctx } = ta;
    const w = await seedTenants(ta);
    const key = w.keys.alicePersonal;
    const { PA, OA, PC } = w.conns;

    // one entry, then a batch
    const one = await call(app, key, "POST", "/v1/usage", {
      connection_id: PA,
      entity: "gpt-4o",
      usage_amount: 1200,
      cost_cents: 3.5,
      workflow_id: "wf1",
      execution_id: "ex1",
      metadata: { node: "LLM" },
    });
    t.equal(one.statusCode, 201, one.body);
    const stored = one.json();
    t.equal(stored.message, "Usage recorded");
    t.equal(stored.count, 1);
    t.match(stored.usage[0], {
      connection_id: PA,
      entity: "gpt-4o",
      usage_amount: 1200,
      usage_entity: "tokens",
      cost_cents: 3.5,
      metadata: { node: "LLM" },
      created_at: String,
      id: String,
    });
    t.ok(
      Math.abs(Date.parse(stored.usage[0].created_at) - Date.now()) < 10_000,
      "created_at set by the service",
    );
    const batch = await call(app, key, "POST", "/v1/usage", [
      {
        connection_id: PA,
        entity: "gpt-4o",
        usage_amount: 800,
        cost_cents: 1.5,
        workflow_id: "wf1",
        execution_id: "ex1",
      },
      {
        connection_id: PA,
        entity: "claude-sonnet-4-5",
        usage_amount: 500,
        workflow_id: "wf1",
        execution_id: "ex2",
      },
      {
        connection_id: OA,
        entity: "scraper",
        usage_amount: 7,
        usage_entity: "custom",
        custom_name: "pages",
        cost_cents: 10,
      },
    ]);
    t.equal(batch.statusCode, 201);
    t.equal(batch.json().usage[1].cost_cents, 0, "cost_cents defaults to 0");
    await ctx.stores.series.waitVisible();

    // all-or-nothing validation with validation_errors
    const bad = await call(app, key, "POST", "/v1/usage", [
      { connection_id: PA, entity: "ok", usage_amount: 1 },
      { connection_id: PA, entity: "x", usage_amount: -5 },
      { connection_id: PA, entity: "x", usage_amount: 1, usage_entity: "custom" },
      { connection_id: PA, entity: "x", usage_amount: "12" },
      { connection_id: PA, entity: "x", usage_amount: 1, colour: "red" },
      { connection_id: PA, entity: "x", usage_amount: 1, metadata: [1] },
    ]);
    t.equal(bad.statusCode, 400);
    t.match(bad.json(), {
      success: false,
      error: { code: "VALIDATION_ERROR", message: "5 of 6 entries are invalid; nothing was stored" },
    });
    t.same(
      bad.json().validation_errors.map((e: { index: number; field: string }) => [e.index, e.field]),
      [
        [1, "usage_amount"],
        [2, "custom_name"],
        [3, "usage_amount"],
        [4, "colour"],
        [5, "metadata"],
      ],
    );
    const tooMany = await call(
      app,
      key,
      "POST",
      "/v1/usage",
      Array.from({ length: 101 }, () => ({ connection_id: PA, entity: "x", usage_amount: 1 })),
    );
    t.equal(tooMany.statusCode, 400);
    t.match(tooMany.json().error.message, /at most 100 entries/);
    const foreign = await call(app, key, "POST", "/v1/usage", [
      { connection_id: PA, entity: "x", usage_amount: 1 },
      { connection_id: PC, entity: "x", usage_amount: 1 },
    ]);
    t.equal(foreign.statusCode, 403);
    t.match(foreign.json().error.message, new RegExp(`No access to connection ${PC} \\(entry 1\\)`));
    const readOnly = await call(app, w.keys.aliceReadOnly, "POST", "/v1/usage", {
      connection_id: PA,
      entity: "x",
      usage_amount: 1,
    });
    t.equal(readOnly.statusCode, 403);
    await ctx.stores.series.waitVisible();

    // list: newest first, filters, offset pages, visibility
    const list = await call(app, key, "GET", "/v1/usage");
    t.equal(list.statusCode, 200);
    t.equal(list.json().pagination.total, 4, "rejected requests stored nothing");
    const entities = list.json().usage_data.map((e: { entity: string }) => e.entity);
    t.equal(entities.length, 4);
    t.equal(entities[3], "gpt-4o", "the first entry is the oldest, listed last");
    const filtered = await call(
      app,
      key,
      "GET",
      `/v1/usage?connection_id=${PA}&workflow_id=wf1&execution_id=ex1`,
    );
    t.equal(filtered.json().usage_data.length, 2);
    const custom = await call(app, key, "GET", "/v1/usage?usage_entity=custom");
    t.same(
      custom.json().usage_data.map((e: { custom_name: string }) => e.custom_name),
      ["pages"],
    );
    const paged = await call(app, key, "GET", "/v1/usage?limit=3&offset=3");
    t.same(paged.json().pagination, { total: 4, limit: 3, offset: 3, has_more: false });
    t.equal(paged.json().usage_data.length, 1);
    const future = await call(app, key, "GET", "/v1/usage?start_date=2099-01-01T00:00:00Z");
    t.equal(future.json().pagination.total, 0);
    const carol = await call(app, w.keys.carolPersonal, "GET", "/v1/usage");
    t.equal(carol.json().pagination.total, 0, "another tenant sees none of it");
    t.equal((await call(app, w.keys.carolPersonal, "GET", `/v1/usage?connection_id=${PA}`)).statusCode, 403);
    const dave = await call(app, w.keys.davePersonal, "GET", "/v1/usage");
    t.same(
      dave.json().usage_data.map((e: { connection_id: string }) => e.connection_id),
      [OA],
      "an org member sees the org's usage only",
    );
    for (const [q, message] of [
      ["limit=101", /query\.limit: must be at most 100/],
      ["usage_entity=coins", /query\.usage_entity: must be tokens or custom/],
      ["start_date=yesterday", /query\.start_date: must be an ISO 8601/],
      [
        "start_date=2026-02-01T00:00:00Z&end_date=2026-01-01T00:00:00Z",
        /query\.start_date: must not be after end_date/,
      ],
      ["connection_id=abc", /query\.connection_id: must be a connection id/],
    ] as const) {
      const r = await call(app, key, "GET", `/v1/usage?${q}`);
      t.equal(r.statusCode, 400, q);
      t.match(r.json().error.message, message, q);
    }

    // totals
    const totals = await call(app, key, "PUT", `/v1/usage?connection_id=${PA}`);
    t.equal(totals.statusCode, 200);
    const body = totals.json();
    t.same(body.totals, { entries: 3, heartbeats: 0, tokens: 2500, cost_cents: 5, cost_usd: 0.05 });
    t.same(body.by_entity.map((e: { entity: string; tokens: number }) => [e.entity, e.tokens]).sort(), [
      ["claude-sonnet-4-5", 500],
      ["gpt-4o", 2000],
    ]);
    t.ok(
      Date.parse(body.end_date) - Date.parse(body.start_date) === 30 * 86_400_000,
      "default range: the last 30 days",
    );
    const runTotals = await call(
      app,
      key,
      "PUT",
      `/v1/usage?connection_id=${PA}&workflow_id=wf1&execution_id=ex1`,
    );
    t.same(runTotals.json().totals, {
      entries: 2,
      heartbeats: 0,
      tokens: 2000,
      cost_cents: 5,
      cost_usd: 0.05,
    });
    const orgTotals = await call(app, key, "PUT", `/v1/usage?connection_id=${OA}`);
    t.same(orgTotals.json().by_unit, [
      { usage_entity: "custom", custom_name: "pages", entries: 1, amount: 7, cost_cents: 10 },
    ]);
    t.equal((await call(app, key, "PUT", "/v1/usage")).statusCode, 400, "connection_id is required");
    t.equal((await call(app, w.keys.carolPersonal, "PUT", `/v1/usage?connection_id=${PA}`)).statusCode, 403);
  });
}
