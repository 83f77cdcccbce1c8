import t, { type Test } from "tap";
import { availabilitySamples } from "../../src/stores/series/tables.js";
import { type TestApp, testApp } from "../helpers/app.js";
import { type BackendName, requireBackend } from "../helpers/backends.js";
import { call, seedTenants } from "../helpers/tenants.js";

/**
 * SLOs per connection (issue #33 point 3): what a user checks. The error budget and every burn
 * rate equal what the samples written say (counted here independently), the same on the sql and
 * QuestDB series stores; samples under maintenance are left out; bad input is a 400 naming the
 * field and stores nothing; another tenant's connection is refused.
 */

const NOW = Date.parse("2026-11-20T12:00:00.000Z");
const MIN = 60_000;

interface Sample {
  at: number;
  ok: boolean;
  maintenance?: boolean;
}

/** Three days of a check a minute, with failures placed in known windows, and ten days ago a few more. */
function history(): Sample[] {
  const out: Sample[] = [];
  for (let k = 0; k < 3 * 1440; k++) {
    const at = NOW - k * MIN - 30_000;
    // 3 of the last 5 minutes failed; 10 failures about 2 hours ago; one failed sample under maintenance
    const ok = !(k < 3 || (k >= 120 && k < 130));
    out.push({ at, ok });
  }
  out.push({ at: NOW - 4 * MIN - 10_000, ok: false, maintenance: true });
  for (let k = 0; k < 20; k++) out.push({ at: NOW - 10 * 1440 * MIN - k * MIN, ok: k >= 5 });
  return out;
}

/** The expected figures, counted from the samples themselves. */
function expected(samples: Sample[], objective: number, windowDays: number) {
  const counted = samples.filter((s) => !s.maintenance);
  const share = (since: number) => {
    const inside = counted.filter((s) => s.at >= since && s.at < NOW);
    return { checks: inside.length, failed: inside.filter((s) => !s.ok).length };
  };
  const dayStart = Math.floor(NOW / (1440 * MIN)) * 1440 * MIN;
  const w = share(dayStart - (windowDays - 1) * 1440 * MIN);
  const rate = (ms: number) => {
    const s = share(NOW - ms);
    return s.checks ? Math.round((s.failed / s.checks / (1 - objective)) * 1e6) / 1e6 : null;
  };
  const consumed = Math.round((w.failed / ((1 - objective) * w.checks)) * 1e6) / 1e6;
  return {
    sli: w,
    consumed,
    remaining: Math.round((1 - w.failed / ((1 - objective) * w.checks)) * 1e6) / 1e6,
    burn: {
      "5m": rate(5 * MIN),
      "30m": rate(30 * MIN),
      "1h": rate(60 * MIN),
      "6h": rate(360 * MIN),
      "1d": rate(1440 * MIN),
      "3d": rate(4320 * MIN),
    },
  };
}

async function world(t: Test, series: BackendName) {
  const ta = await testApp(t, { series });
  ta.ctx.now = () => new Date(NOW);
  const w = await seedTenants(ta);
  return { ta, w };
}

async function writeHistory(ta: TestApp, connectionId: string, samples: Sample[]) {
  await ta.ctx.stores.series.append(
    availabilitySamples,
    samples.map((s) => ({
      ts: new Date(s.at),
      connection_id: connectionId,
      available: s.ok,
      response_time_ms: s.ok ? 100 : null,
      status_code: s.ok ? 200 : 503,
      reason: s.ok ? null : "http_status",
      error: null,
      synthetic: false,
      source: "probe",
      maintenance: s.maintenance ?? false,
    })),
  );
  await ta.ctx.stores.series.waitVisible();
}

for (const series of ["pglite", "questdb"] as BackendName[]) {
  t.test(`error budget and burn rates from the samples, on ${series}`, async (t) => {
    if (!(await requireBackend(t, series))) return;
    const { ta, w } = await world(t, series);
    const id = w.conns.PA;
    const samples = history();
    await writeHistory(ta, id, samples);

    const none = await call(ta.app, w.keys.alicePersonal, "GET", `/v1/connections/${id}/slo`);
    t.equal(none.statusCode, 200);
    t.same(
      none.json(),
      {
        connection_id: id,
        objective: null,
        window_days: null,
        window_start: null,
        created_at: null,
        updated_at: null,
        sli: null,
        error_budget: null,
        burn_rates: null,
      },
      "no SLO set: every figure null",
    );

    const put = await call(ta.app, w.keys.alicePersonal, "PUT", `/v1/connections/${id}/slo`, {
      objective: 0.999,
      window_days: 30,
    });
    t.equal(put.statusCode, 200, put.body);
    const want = expected(samples, 0.999, 30);
    const got = (await call(ta.app, w.keys.alicePersonal, "GET", `/v1/connections/${id}/slo`)).json();
    t.same(got, put.json(), "PUT answers what GET answers");
    t.equal(got.objective, 0.999);
    t.equal(got.window_days, 30);
    t.equal(got.window_start, "2026-10-22T00:00:00.000Z", "30 UTC days, today included");
    t.equal(got.sli.checks, want.sli.checks, "the window's checks, maintenance left out");
    t.equal(got.sli.failed, want.sli.failed, "its failures: 3 + 10 + 5 ten days ago");
    t.equal(got.sli.failed, 18);
    t.same(got.error_budget, { total: 1, consumed: want.consumed, remaining: want.remaining });
    t.ok(got.error_budget.remaining < 0, "18 failures of ~4,340 checks overspend a 99.9 % budget");
    t.same(got.burn_rates, want.burn);
    t.equal(got.burn_rates["5m"], 600, "3 of 5 checks failed: 0.6 / 0.001");

    // a 90-day window with a looser objective: same samples, other figures
    const loose = await call(ta.app, w.keys.alicePersonal, "PUT", `/v1/connections/${id}/slo`, {
      objective: 0.99,
      window_days: 90,
    });
    const want90 = expected(samples, 0.99, 90);
    t.same(loose.json().error_budget, { total: 1, consumed: want90.consumed, remaining: want90.remaining });
    t.equal(loose.json().created_at, got.created_at, "replacing keeps when it was created");

    // a connection with no samples: rates null, nothing consumed
    const empty = await call(ta.app, w.keys.alicePersonal, "PUT", `/v1/connections/${w.conns.OA}/slo`, {
      objective: 0.995,
      window_days: 28,
    });
    t.equal(empty.statusCode, 200, empty.body);
    t.same(empty.json().burn_rates, {
      "5m": null,
      "30m": null,
      "1h": null,
      "6h": null,
      "1d": null,
      "3d": null,
    });
    t.same(empty.json().error_budget, { total: 1, consumed: 0, remaining: 1 });

    const del = await call(ta.app, w.keys.alicePersonal, "DELETE", `/v1/connections/${id}/slo`);
    t.same(del.json(), { message: "SLO removed", connection_id: id, removed: true });
    const again = await call(ta.app, w.keys.alicePersonal, "DELETE", `/v1/connections/${id}/slo`);
    t.equal(again.statusCode, 200);
    t.equal(again.json().removed, false, "removing twice is no error");
    t.equal(
      (await call(ta.app, w.keys.alicePersonal, "GET", `/v1/connections/${id}/slo`)).json().objective,
      null,
    );
  });
}

t.test("bad input: a 400 naming the field, nothing stored", async (t) => {
  const { ta, w } = await world(t, "pglite");
  const id = w.conns.PA;
  const cases: [unknown, string, RegExp][] = [
    [{ objective: 1, window_days: 30 }, "body.objective", /below 1/],
    [{ objective: 0, window_days: 30 }, "body.objective", /between 0\.9 and 0\.99999/],
    [{ objective: 1.5, window_days: 30 }, "body.objective", /fraction, not a percentage/],
    [{ objective: 99.9, window_days: 30 }, "body.objective", /99\.9 % is 0\.999/],
    [{ objective: "0.999", window_days: 30 }, "body.objective", /must be a number, not a string/],
    [{ objective: 0.999, window_days: 7 }, "body.window_days", /one of 28, 30, 90/],
    [{ objective: 0.999, window_days: 365 }, "body.window_days", /one of 28, 30, 90/],
    [{ objective: 0.999 }, "body.window_days", /is required/],
    [{ objective: 0.999, window_days: 30, target: 1 }, "body.target", /not a known field/],
    [[0.999, 30], "body", /JSON object/],
  ];
  for (const [body, field, message] of cases) {
    const r = await call(ta.app, w.keys.alicePersonal, "PUT", `/v1/connections/${id}/slo`, body);
    t.equal(r.statusCode, 400, `${JSON.stringify(body)}: 400`);
    t.match(r.json().error, message, `${JSON.stringify(body)}: says what to send`);
    t.match(JSON.stringify(r.json()), field, `${JSON.stringify(body)}: names ${field}`);
  }
  const stored = await ta.ctx.stores.db.query("SELECT count(*)::int AS n FROM connection_slos");
  t.equal(stored.rows[0]?.n, 0, "nothing stored");
});

t.test(
  "another tenant's connection: refused (403, as every connection endpoint), nothing stored",
  async (t) => {
    const { ta, w } = await world(t, "pglite");
    const put = await call(ta.app, w.keys.bobPersonal, "PUT", `/v1/connections/${w.conns.PA}/slo`, {
      objective: 0.999,
      window_days: 30,
    });
    t.equal(put.statusCode, 403);
    t.equal(
      (await call(ta.app, w.keys.bobPersonal, "GET", `/v1/connections/${w.conns.PA}/slo`)).statusCode,
      403,
    );
    t.equal(
      (await call(ta.app, w.keys.bobPersonal, "DELETE", `/v1/connections/${w.conns.PA}/slo`)).statusCode,
      403,
    );
    const stored = await ta.ctx.stores.db.query("SELECT count(*)::int AS n FROM connection_slos");
    t.equal(stored.rows[0]?.n, 0);
  },
);
