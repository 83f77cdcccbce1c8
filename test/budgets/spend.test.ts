import t from "tap";
import { call } from "../helpers/tenants.js";
import { BACKENDS, budgetWorld } from "./fixtures/world.js";

/**
 * A budget's spend is PUT /v1/usage's total over the UTC month: usage entries' cents and
 * heartbeats' US dollars in one unit, on every backend (the series store holds the spend).
 */
for (const [relational, series] of BACKENDS) {
  t.test(`spend = PUT /v1/usage totals for the month (${relational}, ${series})`, async (t) => {
    const bw = await budgetWorld(t, relational, series);
    if (!bw) return;
    const { app, w } = bw;
    const { OB, OA, PB } = w.conns;
    const bob = w.keys.bobOrgB;

    // October: outside November's budget month
    bw.setNow("2026-10-31T23:58:00Z");
    await bw.heartbeat(100);
    await bw.entry(OB, 10_000, bob);

    // November: heartbeats in dollars, entries in cents (fractional), on bob's gateway
    bw.setNow("2026-11-21T12:00:00Z");
    for (const usd of [0.125, 1.5, 2.000001]) await bw.heartbeat(usd);
    await bw.entry(OB, 33.3333, bob);
    await bw.entry(OB, 0.5, bob);
    // a second org B connection, with entries only
    const made = await call(app, bob, "POST", "/v1/connections", {
      service_type: "workflow_b",
      service_name: "org B make",
      api_token: "secret-token-OB2",
    });
    const OB2 = (made.json() as { connection: { id: string } }).connection.id;
    await bw.entry(OB2, 250, bob);

    const totals = await call(
      app,
      bob,
      "PUT",
      `/v1/usage?connection_id=${OB}&start_date=2026-11-01T00:00:00.000Z&end_date=2026-11-21T12:00:00.000Z`,
    );
    t.equal(totals.statusCode, 200, totals.body);
    const usage = totals.json() as { totals: { cost_cents: number; cost_usd: number; heartbeats: number } };
    t.equal(usage.totals.heartbeats, 3, "November's heartbeats only");
    t.ok(Math.abs(usage.totals.cost_cents - (362.5001 + 33.8333)) < 1e-6, "heartbeat dollars + entry cents");

    const budget = await call(app, bob, "GET", `/v1/connections/${OB}/budget`);
    t.equal(budget.statusCode, 200);
    t.equal(
      budget.json().spent_usd,
      usage.totals.cost_usd,
      "the connection's spend is the totals' cost_usd, exactly",
    );
    t.equal(budget.json().month, "2026-11");

    const other = await call(
      app,
      bob,
      "PUT",
      `/v1/usage?connection_id=${OB2}&start_date=2026-11-01T00:00:00.000Z&end_date=2026-11-21T12:00:00.000Z`,
    );
    const account = await call(app, bob, "GET", "/v1/budget");
    t.equal(account.json().connection_count, 2);
    const sumCents =
      usage.totals.cost_cents + (other.json() as { totals: { cost_cents: number } }).totals.cost_cents;
    t.ok(
      Math.abs(account.json().spent_usd - sumCents / 100) < 1e-8,
      "the organization's spend is the sum over its connections",
      { spent: account.json().spent_usd, sumCents },
    );
    // 20.5 of 30 days gone
    t.ok(
      Math.abs(account.json().projected_usd - (account.json().spent_usd * 30) / 20.5) < 0.006,
      "projected: spend × month length ÷ elapsed",
    );

    // other accounts' spend never counts
    await bw.entry(OA, 99_999);
    await bw.entry(PB, 77_777, w.keys.bobPersonal);
    t.equal((await call(app, bob, "GET", "/v1/budget")).json().spent_usd, account.json().spent_usd);

    // the month is the UTC calendar month: at 00:00:00 UTC on the 1st it starts over
    bw.setNow("2026-12-01T00:00:00Z");
    const december = await call(app, bob, "GET", `/v1/connections/${OB}/budget`);
    t.match(december.json(), { month: "2026-12", spent_usd: 0, projected_usd: 0 });
  });
}
