import { gunzipSync } from "node:zlib";
import t from "tap";
import { MAX_JSON_DEPTH, MAX_URL_LENGTH } from "../../src/http/edge.js";
import { testApp } from "../helpers/app.js";
import { call, seedTenants } from "../helpers/tenants.js";

/**
 * The input rules every request meets before a route sees it (src/http/edge.ts, docs/api.md: Input
 * rules), and the consistency rules of the HTTP surface: text the stores cannot hold, depth,
 * prototype keys, "is required", repeated parameters, id case, number bounds, 405 with Allow,
 * CORS and compression.
 */
t.test("input rules at the edge", async (t) => {
  const ta = await testApp(t);
  const w = await seedTenants(ta);
  const key = w.keys.alicePersonal;
  const raw = (method: "GET" | "POST" | "PUT", url: string, payload?: string) =>
    ta.app.inject({
      method,
      url,
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      ...(payload === undefined ? {} : { payload }),
    });
  const after = async () => {
    const list = await call(ta.app, key, "GET", "/v1/connections");
    t.equal(list.statusCode, 200, "the account's connections still read");
    const reads = await call(ta.app, key, "GET", "/v1/executions");
    t.equal(reads.statusCode, 200, "its executions still read");
  };

  const refused: [string, () => Promise<{ statusCode: number; body: string }>, number, RegExp][] = [
    [
      "NUL in a body string",
      () => raw("POST", "/v1/connections", '{"service_type":"gateway","service_name":"a\\u0000b"}'),
      400,
      /body\.service_name: contains U\+0000/,
    ],
    [
      "a lone surrogate in a body string",
      () => raw("POST", "/v1/connections", '{"service_type":"gateway","service_name":"a\\ud800b"}'),
      400,
      /body\.service_name: contains U\+0000 or half of a surrogate pair/,
    ],
    ["NUL in a field name", () => raw("POST", "/v1/usage", '[{"a\\u0000":1}]'), 400, /a field name/],
    [
      "NUL in the query",
      () => raw("GET", "/v1/executions?workflow_id=%00"),
      400,
      /query\.workflow_id: contains U\+0000/,
    ],
    [
      "a lone surrogate in a usage entity",
      () =>
        call(ta.app, key, "POST", "/v1/usage", [
          { connection_id: w.conns.PA, entity: "gpt\ud83d", usage_amount: 1 },
        ]),
      400,
      /entity: contains/,
    ],
    [
      "nesting deeper than the limit",
      () =>
        raw(
          "POST",
          "/v1/connections",
          `${'{"a":'.repeat(MAX_JSON_DEPTH + 1)}1${"}".repeat(MAX_JSON_DEPTH + 1)}`,
        ),
      400,
      new RegExp(`nested deeper than ${MAX_JSON_DEPTH} levels`),
    ],
    [
      "nesting 100,000 deep (never reaches a parser)",
      () => raw("POST", "/v1/usage", `${"[".repeat(100_000)}${"]".repeat(100_000)}`),
      400,
      /nested deeper/,
    ],
    ["__proto__", () => raw("POST", "/v1/connections", '{"__proto__":{"x":1}}'), 400, /__proto__/],
    ["malformed JSON", () => raw("POST", "/v1/connections", '{"service_type":'), 400, /malformed JSON/],
    [
      "a missing field says it is required",
      () => call(ta.app, key, "POST", "/v1/connections", { service_name: "x" }),
      400,
      /body\.service_type: is required; it must be one of/,
    ],
    [
      "a missing query parameter says it is required",
      () => call(ta.app, key, "GET", "/v1/analytics"),
      400,
      /query\.metric_type: is required; it must be one of/,
    ],
    [
      "a usage entry without its connection says it is required",
      () => call(ta.app, key, "POST", "/v1/usage", { entity: "gpt-4o", usage_amount: 1 }),
      400,
      /"field":"connection_id","message":"is required/,
    ],
    [
      "a repeated parameter",
      () => call(ta.app, key, "GET", "/v1/executions?limit=1&limit=2"),
      400,
      /query\.limit: is given more than once/,
    ],
    [
      "a usage amount near the largest double",
      () =>
        call(ta.app, key, "POST", "/v1/usage", [
          { connection_id: w.conns.PA, entity: "gpt-4o", usage_amount: 1.7e308 },
        ]),
      400,
      /"field":"usage_amount","message":"must be at most/,
    ],
    [
      "cost in cents beyond the bound",
      () =>
        call(ta.app, key, "POST", "/v1/usage", [
          { connection_id: w.conns.PA, entity: "gpt-4o", usage_amount: 1, cost_cents: 1e15 },
        ]),
      400,
      /"field":"cost_cents","message":"must be at most/,
    ],
  ];
  for (const [what, send, status, message] of refused) {
    const res = await send();
    t.equal(res.statusCode, status, `${what}: ${status}`);
    t.match(res.body, message, `${what}: names the problem`);
  }
  await after();

  // heartbeats: tokens and money bounded
  const gw = await call(ta.app, key, "POST", "/v1/connections", {
    service_type: "gateway",
    service_name: "edge gw",
  });
  const ingest = (gw.json() as { ingest_api_key: string }).ingest_api_key;
  const beat = await call(ta.app, ingest, "POST", "/v1/gateway/ingest", {
    type: "heartbeat",
    gateway: { status: "healthy", latencyMs: 5, version: "1" },
    tokens: {
      period: {
        inputTokens: 1e15,
        outputTokens: 0,
        estimatedCostUsd: 1e300,
        startedAt: "2026-01-05T00:00:00Z",
        endedAt: "2026-01-05T00:01:00Z",
      },
    },
  });
  t.equal(beat.statusCode, 400);
  t.match(beat.body, /inputTokens: must be at most/);
  await after();

  // ids: the case of a UUID does not matter
  const upper = await call(ta.app, key, "GET", `/v1/connections/${w.conns.PA.toUpperCase()}`);
  t.equal(upper.statusCode, 200, "an upper-case connection id finds the connection");
  const filtered = await call(ta.app, key, "GET", `/v1/executions?connection_id=${w.conns.PA.toUpperCase()}`);
  t.equal(filtered.statusCode, 200, "and filters by it");
});

t.test("a known path with another method is a 405 naming the methods it has", async (t) => {
  const ta = await testApp(t);
  const w = await seedTenants(ta);
  const res = await ta.app.inject({
    method: "PATCH",
    url: `/v1/connections/${w.conns.PA}`,
    headers: { authorization: `Bearer ${w.keys.alicePersonal}` },
  });
  t.equal(res.statusCode, 405);
  t.equal(res.headers.allow, "GET, HEAD, PUT, DELETE");
  t.match(res.json(), { success: false, error: { code: "METHOD_NOT_ALLOWED", details: { allow: Array } } });
  const del = await ta.app.inject({ method: "DELETE", url: "/v1/availability" });
  t.equal(del.statusCode, 405);
  t.equal(del.headers.allow, "GET, HEAD");
  const unknown = await ta.app.inject({ method: "GET", url: "/v1/nothing-here" });
  t.equal(unknown.statusCode, 404, "an unknown path is still a 404");
});

t.test("CORS: off by default, the configured origins when on", async (t) => {
  const off = await testApp(t);
  const pre = await off.app.inject({
    method: "OPTIONS",
    url: "/v1/connections",
    headers: { origin: "https://app.example.com", "access-control-request-method": "GET" },
  });
  t.notOk(pre.headers["access-control-allow-origin"], "no CORS headers without CORS_ORIGINS");

  const on = await testApp(t, { env: { CORS_ORIGINS: "https://app.example.com" } });
  const ok = await on.app.inject({
    method: "OPTIONS",
    url: "/v1/connections",
    headers: {
      origin: "https://app.example.com",
      "access-control-request-method": "GET",
      "access-control-request-headers": "authorization",
    },
  });
  t.equal(ok.statusCode, 204);
  t.equal(ok.headers["access-control-allow-origin"], "https://app.example.com");
  t.match(String(ok.headers["access-control-allow-headers"]), /Authorization/i);
  const other = await on.app.inject({
    method: "OPTIONS",
    url: "/v1/connections",
    headers: { origin: "https://evil.example", "access-control-request-method": "GET" },
  });
  t.notOk(other.headers["access-control-allow-origin"], "another origin is not allowed");
  const unknown = await on.app.inject({ method: "GET", url: "/v1/nothing-here" });
  t.equal(unknown.statusCode, 404, "CORS's catch-all preflight does not turn unknown paths into 405s");
});

t.test("large answers are compressed when the client accepts it", async (t) => {
  const ta = await testApp(t);
  const w = await seedTenants(ta);
  const res = await ta.app.inject({
    method: "GET",
    url: "/v1/openapi.json",
    headers: { "accept-encoding": "gzip", authorization: `Bearer ${w.keys.alicePersonal}` },
  });
  t.equal(res.statusCode, 200);
  t.equal(res.headers["content-encoding"], "gzip");
  const doc = JSON.parse(gunzipSync(res.rawPayload).toString("utf8")) as { openapi: string };
  t.match(doc.openapi, /^3\./);
  const plain = await ta.app.inject({ method: "GET", url: "/v1/openapi.json" });
  t.notOk(plain.headers["content-encoding"], "not without Accept-Encoding");
});

t.test(
  "long URLs over a real socket: 414 in the route's style, 431 from Node's parser in the envelope",
  async (t) => {
    const ta = await testApp(t);
    const w = await seedTenants(ta);
    const base = await ta.app.listen({ port: 0, host: "127.0.0.1" });
    const headers = { authorization: `Bearer ${w.keys.alicePersonal}` };
    const fits = await fetch(
      `${base}/v1/connections?service_type=gateway&x=${"a".repeat(MAX_URL_LENGTH - 100)}`,
      { headers },
    );
    t.equal(
      fits.status,
      400,
      "a URL just under the limit reaches the route (which names the unknown parameter)",
    );
    t.match(await fits.json(), { error: /x/ });

    const long = await fetch(`${base}/v1/connections?x=${"a".repeat(MAX_URL_LENGTH)}`, { headers });
    t.equal(long.status, 414);
    t.match(
      await long.json(),
      { error: new RegExp(`at most ${MAX_URL_LENGTH}`) },
      "connections: the {error} body",
    );
    const envelope = await fetch(`${base}/v1/availability?cursor=${"a".repeat(MAX_URL_LENGTH)}`, { headers });
    t.equal(envelope.status, 414);
    t.match(
      await envelope.json(),
      { success: false, error: { code: "URI_TOO_LONG" } },
      "others: the envelope",
    );

    const huge = await fetch(`${base}/v1/availability?cursor=${"a".repeat(20_000)}`, { headers });
    t.equal(huge.status, 431, "past Node's 16 KiB header limit");
    t.match(await huge.json(), { success: false, error: { code: "HEADERS_TOO_LARGE", message: /16 KiB/ } });
    const after = await fetch(`${base}/v1/connections`, { headers });
    t.equal(after.status, 200, "and the server answers the next request");
  },
);
