import t from "tap";
import { freshDatabaseUrl, requireBackend } from "../helpers/backends.js";
import { testApp } from "../helpers/app.js";
import { twoApis } from "../helpers/process.js";
import { call, seedTenants } from "../helpers/tenants.js";

/**
 * Budgets noticed at ingest (src/budgets/watch.ts): spend that crosses 50, 80 or 100 % of a budget
 * has its warning in the alert history within 10 seconds, with no budget job running, each
 * threshold its own row even when one request crosses several, each once per month, also when two
 * processes share the ingest.
 */

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const WITHIN_MS = 10_000;

interface Alert {
  kind: string;
  subject: string;
  connection_id: string | null;
}

/**
 * The threshold warnings of the alert history, by level ("50", "80", "100"). A projected overrun
 * may come too (its run rate depends on the day of the month the test runs): left out.
 */
function thresholds(alerts: Alert[]): string[] {
  return levels(alerts).filter((l) => l !== "projected");
}

/** The budget warnings of the alert history, by level ("50", "80", "100", "projected"). */
function levels(alerts: Alert[]): string[] {
  return alerts
    .filter((a) => a.kind === "budget_warning")
    .map(
      (a) =>
        /used (\d+)% of/.exec(a.subject)?.[1] ??
        (/is over its monthly budget/.test(a.subject)
          ? "100"
          : /on course/.test(a.subject)
            ? "projected"
            : a.subject),
    )
    .sort();
}

/** Polls `read` until `done` holds or `ms` pass; answers the time it took (or Infinity). */
async function within<T>(
  ms: number,
  read: () => Promise<T>,
  done: (v: T) => boolean,
): Promise<{ took: number; last: T }> {
  const start = Date.now();
  let last = await read();
  while (!done(last)) {
    if (Date.now() - start > ms) return { took: Number.POSITIVE_INFINITY, last };
    await sleep(200);
    last = await read();
  }
  return { took: Date.now() - start, last };
}

t.test(
  "one process: each threshold is in the alert history within 10 s of the usage that crosses it",
  async (t) => {
    const ta = await testApp(t);
    const w = await seedTenants(ta);
    const key = w.keys.alicePersonal;
    const { PA } = w.conns;
    const put = await call(ta.app, key, "PUT", `/v1/connections/${PA}/budget`, { monthly_budget_usd: 10 });
    t.equal(put.statusCode, 200, put.body);
    const alerts = async () =>
      thresholds(
        (await call(ta.app, key, "GET", `/v1/alerts?kind=budget_warning&connection_id=${PA}`)).json()
          .data as Alert[],
      );
    const spend = async (cents: number) => {
      const r = await call(ta.app, key, "POST", "/v1/usage", {
        connection_id: PA,
        entity: "gpt-4o",
        usage_amount: 100,
        cost_cents: cents,
      });
      t.equal(r.statusCode, 201, r.body);
    };
    t.same(await alerts(), [], "no warning before any spend");

    await spend(550); // $5.50 of $10
    const fifty = await within(WITHIN_MS, alerts, (l) => l.includes("50"));
    t.ok(fifty.took <= WITHIN_MS, `the 50% warning after ${fifty.took} ms`);
    t.same(fifty.last, ["50"], "and only it");

    await spend(500); // $10.50: one request crosses 80 % and 100 %
    const both = await within(WITHIN_MS, alerts, (l) => l.includes("80") && l.includes("100"));
    t.ok(both.took <= WITHIN_MS, `80% and 100% after ${both.took} ms`);
    t.same(both.last, ["100", "50", "80"], "one row for each threshold the request crossed");

    await spend(300);
    await sleep(3_000);
    t.same(await alerts(), ["100", "50", "80"], "more spend in the month warns no more");
    const incidents = (await call(ta.app, key, "GET", `/v1/incidents?connection_id=${PA}&kind=budget`)).json()
      .data;
    t.equal(incidents.length, 1, "the budget incident opened once");
  },
);

t.test("a heartbeat's cost counts as soon as it is stored", async (t) => {
  const ta = await testApp(t);
  const w = await seedTenants(ta);
  const key = w.keys.bobOrgB;
  const gw = w.conns.OB; // org B's gateway, whose ingestion key the world holds
  t.equal(
    (await call(ta.app, key, "PUT", `/v1/connections/${gw}/budget`, { monthly_budget_usd: 1 })).statusCode,
    200,
  );
  const res = await ta.app.inject({
    method: "POST",
    url: "/v1/gateway/ingest",
    headers: { authorization: `Bearer ${w.keys.ingest}` },
    payload: {
      type: "heartbeat",
      gateway: { status: "healthy", latencyMs: 20, version: "1.0.0" },
      tokens: {
        period: {
          startedAt: new Date(Date.now() - 10_000).toISOString(),
          endedAt: new Date().toISOString(),
          inputTokens: 1000,
          outputTokens: 500,
          estimatedCostUsd: 0.6,
        },
        byModel: [],
      },
    },
  });
  t.equal(res.statusCode, 201, res.body);
  const got = await within(
    WITHIN_MS,
    async () =>
      levels(
        (await call(ta.app, key, "GET", `/v1/alerts?kind=budget_warning&connection_id=${gw}`)).json()
          .data as Alert[],
      ),
    (l) => l.includes("50"),
  );
  t.ok(got.took <= WITHIN_MS, `60% of $1 from one heartbeat: warned after ${got.took} ms`);
});

t.test("two processes share the ingest: every warning once, each within 10 s", async (t) => {
  if (!(await requireBackend(t, "postgres"))) return;
  const env = {
    DATABASE_URL: await freshDatabaseUrl(t),
    VIGIL_SECRET: "budget-watch-secret-budget-watch-secret",
    LOG_LEVEL: "warn",
  };
  const { a, b, admin } = await twoApis(t, env); // api role only: no budget job runs
  const user = await admin("create-user", "--email", "spender@x.example");
  const key = (await admin("create-key", "--user", user.id as string)).key as string;
  const api = async (base: string, method: string, path: string, body?: unknown) => {
    const r = await fetch(`${base}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${key}`,
        ...(body === undefined ? {} : { "content-type": "application/json" }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: r.status, json: (await r.json()) as Record<string, unknown> };
  };
  const created = await api(a.url, "POST", "/v1/connections", {
    service_type: "gateway",
    service_name: "shared spend",
  });
  t.equal(created.status, 201);
  const id = (created.json.connection as { id: string }).id;
  t.equal((await api(b.url, "PUT", `/v1/connections/${id}/budget`, { monthly_budget_usd: 10 })).status, 200);
  const alerts = async () =>
    levels(
      (await api(a.url, "GET", `/v1/alerts?kind=budget_warning&connection_id=${id}`)).json.data as Alert[],
    );

  // $1.50 at a time, alternately through A and B: neither alone sees half of the budget spent
  let spent = 0;
  const crossed: Record<string, number> = {};
  for (let i = 0; i < 8; i++) {
    const via = i % 2 === 0 ? a.url : b.url;
    const r = await api(via, "POST", "/v1/usage", {
      connection_id: id,
      entity: "gpt-4o",
      usage_amount: 10,
      cost_cents: 150,
    });
    t.equal(r.status, 201);
    spent += 150;
    for (const pct of [50, 80, 100])
      if (spent >= pct * 10 && crossed[pct] === undefined) crossed[pct] = Date.now();
    await sleep(400);
  }
  const all = await within(WITHIN_MS, alerts, (l) => ["50", "80", "100"].every((x) => l.includes(x)));
  t.same(
    all.last.filter((l) => l !== "projected"),
    ["100", "50", "80"],
    "each threshold once, across both processes",
  );
  // each warning's delay from the usage entry that crossed it, read from the alert rows' times
  const rows = (await api(a.url, "GET", `/v1/alerts?kind=budget_warning&connection_id=${id}`)).json
    .data as (Alert & { created_at: string })[];
  for (const pct of ["50", "80", "100"]) {
    const row = rows.find((r) => levels([r])[0] === pct);
    const delay = row ? Date.parse(row.created_at) - (crossed[Number(pct)] ?? 0) : Number.POSITIVE_INFINITY;
    t.ok(delay <= WITHIN_MS, `${pct}%: in the alert history ${delay} ms after the entry that crossed it`);
  }
  await sleep(2_500);
  t.same(
    (await alerts()).filter((l) => l !== "projected"),
    ["100", "50", "80"],
    "and nothing more",
  );
});
