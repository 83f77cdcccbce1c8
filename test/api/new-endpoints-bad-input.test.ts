import t from "tap";
import { testApp } from "../helpers/app.js";
import { call, seedTenants } from "../helpers/tenants.js";

/**
 * Odd input to the endpoints added for #13 and #14 (budgets, incidents, alerts, OAuth): every
 * answer is a 4xx that names the problem, never a 500, and a later read still works.
 */
t.test("new endpoints answer odd input with a 4xx naming the problem", async (t) => {
  const ta = await testApp(t, { env: { PUBLIC_URL: "http://127.0.0.1:8080" } });
  const w = await seedTenants(ta);
  const key = w.keys.alicePersonal;
  const pa = w.conns.PA;
  const raw = (method: "GET" | "POST" | "PUT", url: string, payload: string, type = "application/json") =>
    ta.app.inject({
      method,
      url,
      headers: { authorization: `Bearer ${key}`, "content-type": type },
      payload,
    });

  const cases: [string, () => Promise<{ statusCode: number; body: string }>, RegExp][] = [
    [
      "budget: string amount",
      () => call(ta.app, key, "PUT", `/v1/connections/${pa}/budget`, { monthly_budget_usd: "250 USD" }),
      /monthly_budget_usd/,
    ],
    [
      "budget: negative",
      () => call(ta.app, key, "PUT", `/v1/connections/${pa}/budget`, { monthly_budget_usd: -5 }),
      /monthly_budget_usd/,
    ],
    [
      "budget: absurd",
      () => call(ta.app, key, "PUT", `/v1/connections/${pa}/budget`, { monthly_budget_usd: 1e300 }),
      /monthly_budget_usd/,
    ],
    [
      "budget: cents field",
      () => call(ta.app, key, "PUT", `/v1/connections/${pa}/budget`, { monthly_budget_cents: 25000 }),
      /dollars|monthly_budget_usd/,
    ],
    [
      "budget: array body",
      () => raw("PUT", `/v1/connections/${pa}/budget`, "[1,2]"),
      /body|monthly_budget_usd/,
    ],
    ["budget: malformed JSON", () => raw("PUT", `/v1/connections/${pa}/budget`, "{nope"), /JSON|body/],
    [
      "account budget: nested junk",
      () => call(ta.app, key, "PUT", "/v1/budget", { monthly_budget_usd: { a: 1 } }),
      /monthly_budget_usd/,
    ],
    ["budget: bad connection id", () => call(ta.app, key, "GET", "/v1/connections/%00%ff/budget"), /.+/],
    [
      "acknowledge: note not a string",
      () => call(ta.app, key, "POST", `/v1/incidents/${crypto.randomUUID()}/acknowledge`, { note: 42 }),
      /note|incident/,
    ],
    [
      "acknowledge: bad id",
      () => call(ta.app, key, "POST", "/v1/incidents/not-a-uuid/acknowledge", {}),
      /id/,
    ],
    [
      "acknowledge: huge note",
      () =>
        call(ta.app, key, "POST", `/v1/incidents/${crypto.randomUUID()}/acknowledge`, {
          note: "x".repeat(5000),
        }),
      /note|incident/,
    ],
    ["incidents: unknown status", () => call(ta.app, key, "GET", "/v1/incidents?status=sleeping"), /status/],
    ["incidents: unknown kind", () => call(ta.app, key, "GET", "/v1/incidents?kind=volcano"), /kind/],
    ["alerts: unknown kind", () => call(ta.app, key, "GET", "/v1/alerts?kind=pager"), /kind/],
    ["alerts: bad cursor", () => call(ta.app, key, "GET", "/v1/alerts?cursor=garbage"), /cursor/],
    ["alerts: limit too big", () => call(ta.app, key, "GET", "/v1/alerts?limit=100000"), /limit/],
    [
      "oauth register: junk JSON",
      () =>
        ta.app.inject({
          method: "POST",
          url: "/oauth/register",
          headers: { "content-type": "application/json" },
          payload: "[[[",
        }),
      /invalid_request|error/,
    ],
    [
      "oauth register: redirect_uris not an array",
      () =>
        ta.app.inject({
          method: "POST",
          url: "/oauth/register",
          payload: { redirect_uris: "https://a.example/cb" },
        }),
      /redirect_uris/,
    ],
    [
      "oauth token: junk form",
      () =>
        ta.app.inject({
          method: "POST",
          url: "/oauth/token",
          headers: { "content-type": "application/x-www-form-urlencoded" },
          payload: "%%%=&&&",
        }),
      /invalid_request|unsupported_grant_type/,
    ],
    [
      "oauth token: wrong content type",
      () =>
        ta.app.inject({
          method: "POST",
          url: "/oauth/token",
          headers: { "content-type": "text/plain" },
          payload: "hello",
        }),
      /invalid_request/,
    ],
    [
      "oauth authorize: repeated params",
      () => ta.app.inject("/oauth/authorize?client_id=a&client_id=b"),
      /.+/,
    ],
    [
      "oauth revoke: no token",
      () => ta.app.inject({ method: "POST", url: "/oauth/revoke", payload: {} }),
      /token/,
    ],
  ];
  for (const [name, send, names] of cases) {
    const res = await send();
    t.ok(res.statusCode >= 400 && res.statusCode < 500, `${name}: ${res.statusCode} is a 4xx`);
    t.match(res.body, names, `${name}: names the problem`);
  }
  // Nothing of that broke a later read.
  t.equal((await call(ta.app, key, "GET", `/v1/connections/${pa}/budget`)).statusCode, 200);
  t.equal((await call(ta.app, key, "GET", "/v1/alerts")).statusCode, 200);
  t.equal((await call(ta.app, key, "GET", "/v1/incidents")).statusCode, 200);
});
