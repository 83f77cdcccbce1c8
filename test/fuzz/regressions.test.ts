import Fastify from "fastify";
import t, { type Test } from "tap";
import { frameworkErrors, registerInputRules } from "../../src/http/edge.js";
import { METRIC_TYPES } from "../../src/http/read-queries.js";
import { type TestApp, testApp } from "../helpers/app.js";
import { mcpTokenFor } from "../helpers/oauth.js";
import { call, seedTenants, type Tenants } from "../helpers/tenants.js";
import { allowTime, productionStores } from "./harness.js";

/**
 * Each class of problem the fuzz suite found, pinned by a few plain examples, so it stays fixed
 * whatever the fuzzer's seed: the answers of requests no route takes, the statuses every route
 * documents, times outside the range the stores hold, budgets that round to zero cents, URLs the
 * router cannot read, invalid params in an MCP batch.
 */
allowTime(t, 10);
t.test(
  "MCP: a batch with invalid params is answered -32602, never -32603 (found by the fuzz suite)",
  async (t) => {
    const ta = await testApp(t);
    const w = await seedTenants(ta);
    const token = await mcpTokenFor(ta.app, ta.ctx, w.users.alice.id as string);
    const post = (body: unknown) =>
      ta.app.inject({
        method: "POST",
        url: "/mcp",
        headers: {
          authorization: `Bearer ${token}`,
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
        },
        payload: JSON.stringify(body),
      });
    const call = (id: number, args: unknown) => ({
      jsonrpc: "2.0",
      id,
      method: "tools/call",
      params: { name: "list_anomalies", arguments: args },
    });
    const list = { jsonrpc: "2.0", id: 2, method: "tools/list" };

    // was: 200 with the batch's first answer a -32603 internal error carrying a dump of schema issues
    const res = await post([
      call(1, [null, 2]),
      list,
      { jsonrpc: "2.0", method: "notifications/initialized" },
    ]);
    t.equal(res.statusCode, 200);
    const answers = res.json() as { id: number; error?: { code: number; message: string } }[];
    t.equal(answers.length, 2, "one answer a request, none for the notification");
    t.match(answers[0], {
      id: 1,
      error: { code: -32602, message: /Invalid params for tools\/call: params\.arguments/ },
    });
    t.match(answers[1], {
      id: 2,
      error: { code: -32600, message: /Not run: message 0 of the batch has invalid params/ },
    });
    t.notMatch(res.body, /-32603/);

    const alone = await post(call(3, "not an object"));
    t.match(alone.json(), { id: 3, error: { code: -32602 } }, "a single message, as before");
    const fine = await post([call(4, { limit: 1 }), list]);
    const ok = fine.json() as { id: number; result?: unknown }[];
    t.ok(
      ok.every((a) => a.result),
      "a valid batch still runs",
      { body: fine.body },
    );
  },
);

/** Reads at both ends of the accepted time range answer; a time outside it is a 400 naming the field. */
async function timestampRange(t: Test, ta: TestApp, w: Tenants) {
  const key = w.keys.alicePersonal;
  const reads = [
    "/v1/availability",
    "/v1/executions",
    "/v1/executions?group_by=workflow",
    "/v1/incidents",
    "/v1/anomalies",
    "/v1/alerts",
    "/v1/availability/summary?window=week",
    "/v1/availability/summary?window=month",
    ...METRIC_TYPES.map((m) => `/v1/analytics?metric_type=${m}`),
  ];
  // until=0001-01-01 made a window in year 0, which PostgreSQL refuses (was a 500)
  for (const url of reads) {
    const sep = url.includes("?") ? "&" : "?";
    for (const q of [
      "since=1970-01-01T00:00:00Z",
      "until=1970-01-01T00:00:00Z",
      "since=9999-12-31T23:59:59.999Z",
    ]) {
      const res = await call(ta.app, key, "GET", `${url}${sep}${q}`);
      t.equal(res.statusCode, 200, `${url} ${q}`, { body: res.body });
    }
  }
  for (const at of [
    "0001-01-01T00:00:00Z",
    "0000-01-01T00:00:00Z",
    "1969-12-31T23:59:59Z",
    "9999-12-31T23:59:59-00:01",
  ]) {
    const res = await call(
      ta.app,
      key,
      "GET",
      `/v1/analytics?metric_type=weekly_availability&until=${encodeURIComponent(at)}`,
    );
    t.equal(res.statusCode, 400, `until=${at}: 400`, { body: res.body });
    t.match(res.body, /query\.until: must be a time from 1970-01-01T00:00:00Z to 9999-12-31T23:59:59Z/);
  }
  const usage = await call(ta.app, key, "GET", "/v1/usage?start_date=0001-01-01T00:00:00Z");
  t.equal(usage.statusCode, 400, "usage start_date in year 1: 400");
  const totals = await call(
    ta.app,
    key,
    "PUT",
    `/v1/usage?connection_id=${w.conns.PA}&end_date=9999-12-31T23:59:59Z`,
  );
  t.equal(totals.statusCode, 200, "usage totals up to the end of 9999", { body: totals.body });
}

t.test("REST: what the fuzz suite found, by example", async (t) => {
  const ta = await testApp(t);
  const w = await seedTenants(ta);

  t.test("timestamps: the documented range, and every read at its ends", (t) => timestampRange(t, ta, w));

  t.test("a budget that rounds to 0 cents is refused (was a 500)", async (t) => {
    for (const [url, amount] of [
      ["/v1/budget", 2.2e-196],
      [`/v1/connections/${w.conns.PA}/budget`, 0.004],
      ["/v1/budget", Number.MIN_VALUE],
    ] as const) {
      const res = await call(ta.app, w.keys.alicePersonal, "PUT", url, { monthly_budget_usd: amount });
      t.equal(res.statusCode, 400, `${url} ${amount}`, { body: res.body });
      t.match(res.body, /monthly_budget_usd: must be at least 0\.01/);
    }
    const cent = await call(ta.app, w.keys.alicePersonal, "PUT", "/v1/budget", { monthly_budget_usd: 0.01 });
    t.equal(cent.statusCode, 200, "one cent is a budget");
  });

  t.test("a request no route takes is a 404 or 405 whatever it carries", async (t) => {
    const authorization = `Bearer ${w.keys.alicePersonal}`;
    const send = (
      method: "GET" | "PUT" | "POST" | "PATCH" | "OPTIONS",
      url: string,
      type?: string,
      payload?: string,
    ) =>
      ta.app.inject({
        method,
        url,
        headers: { authorization, ...(type ? { "content-type": type } : {}) },
        ...(payload === undefined ? {} : { payload }),
      });
    const big = `{"pad":"${"x".repeat(2 * 1024 * 1024)}"}`;
    const cases: [string, () => ReturnType<typeof send>, number][] = [
      [
        "a wrong method with malformed JSON (was 400)",
        () => send("PATCH", `/v1/connections/${w.conns.PA}`, "application/json", '{"a":'),
        405,
      ],
      [
        "a wrong method with a body over the limit (was 413)",
        () => send("PUT", "/v1/executions", "application/json", big),
        405,
      ],
      [
        "a wrong method with an unreadable content type (was 400)",
        () => send("POST", `/v1/connections/${w.conns.PA}`, "a/b/c", "x"),
        405,
      ],
      ["a wrong method with NUL in the query (was 400)", () => send("OPTIONS", "/v1/budget?x=%00"), 405],
      [
        "an unknown path with a body over the limit (was 413)",
        () => send("PUT", "/v1/budgetx", "application/json", big),
        404,
      ],
      ["an unknown path with NUL in its path (was 400)", () => send("GET", "/v1/executions/%00"), 404],
    ];
    for (const [what, go, status] of cases) {
      const res = await go();
      t.equal(res.statusCode, status, what);
      if (status === 405) t.ok(res.headers.allow, `${what}: Allow`);
    }
    const ok = await send(
      "PUT",
      `/v1/connections/${w.conns.PA}`,
      "application/json",
      '{"service_name":"still read"}',
    );
    t.equal(ok.statusCode, 200, "a route's own body is still read");
  });

  t.test("every route documents 400, and 413 where a body is read", async (t) => {
    const doc = (await ta.app.inject("/v1/openapi.json")).json() as {
      paths: Record<string, Record<string, { responses: Record<string, unknown> }>>;
    };
    for (const [path, ops] of Object.entries(doc.paths))
      for (const [method, op] of Object.entries(ops)) {
        t.ok(op.responses["400"], `${method.toUpperCase()} ${path} documents 400`);
        if (method !== "get") t.ok(op.responses["413"], `${method.toUpperCase()} ${path} documents 413`);
      }
    // a route without parameters still meets the edge's rules (was an undocumented 400)
    const res = await ta.app.inject("/readyz?%00=");
    t.equal(res.statusCode, 400);
    t.match(res.json(), { success: false, error: { code: "VALIDATION_ERROR" } });
  });
});

t.test("timestamps at the ends of the range on PostgreSQL + QuestDB", async (t) => {
  if (!(await productionStores(t))) return;
  const ta = await testApp(t, { relational: "postgres", series: "questdb" });
  await timestampRange(t, ta, await seedTenants(ta));
});

t.test("frameworkErrors: a URL the router cannot read is answered in the envelope", async (t) => {
  const app = Fastify({ frameworkErrors });
  registerInputRules(app);
  app.get("/v1/things/:id", async () => ({ ok: true }));
  t.teardown(() => app.close());
  const bad = await app.inject("/v1/things/%ED%A0%80");
  t.equal(bad.statusCode, 400, "bad percent-encoding: 400");
  t.match(bad.json(), { success: false, error: { code: "VALIDATION_ERROR", message: /percent-encoded/ } });
  const long = await app.inject(`/v1/things/${"a".repeat(150)}`);
  t.equal(long.statusCode, 404, "a path segment over 100 characters names no route");
  t.match(long.json(), { success: false, error: { code: "NOT_FOUND" } });
  t.notMatch(long.body, /FST_ERR/, "no framework error code");
});
