import t, { type Test } from "tap";
import { BURN_ALERTS, burnThreshold, judgeBurn } from "../../src/slo/burn.js";
import { runSloBurnChecks } from "../../src/slo/job.js";
import { availabilitySamples } from "../../src/stores/series/tables.js";
import { testApp } from "../helpers/app.js";
import { type BackendName, requireBackend } from "../helpers/backends.js";
import { call, seedTenants } from "../helpers/tenants.js";

/**
 * Burn-rate alerts of SLOs (issue #33 point 4), as an on-call engineer checks them: the
 * workbook's thresholds for 30 days and scaled for 28 and 90; a fast burn pages once (one
 * `slo_burn` alert, one incident) and resolves minutes after the failures stop, without opening
 * again while the long window is still high (no flapping); a slow burn opens a ticket that reaches
 * a paging provider as a plain message and then pages when the burn speeds up; an acknowledged
 * incident gets no further alert while the burn goes on; removing the SLO resolves it. The same
 * decisions on the sql and QuestDB series stores.
 */

const MIN = 60_000;
const T0 = Date.parse("2026-11-20T12:00:00.000Z");

t.test("the workbook's thresholds, scaled to the SLO window and capped by the objective", async (t) => {
  const at = (days: number, objective = 0.999) => BURN_ALERTS.map((a) => burnThreshold(a, days, objective));
  t.same(at(30), [14.4, 6, 1], "30 days: page at 14.4x (1 h) and 6x (6 h), ticket at 1x (3 d)");
  t.same(at(28), [13.44, 5.6, 0.933333], "28 days: the same budget shares");
  t.same(at(90), [43.2, 18, 3], "90 days");
  t.same(
    at(90, 0.95),
    [20, 18, 3],
    "a threshold above 1/(1-objective) (every check failing) is lowered to it",
  );
  const rates = { "5m": 20, "30m": 1, "1h": 14.4, "6h": 2, "1d": 1, "3d": 1 };
  t.equal(judgeBurn(rates, 30, 0.999).severity, "page", "1 h and 5 m both at 14.4x or more: page");
  t.equal(judgeBurn({ ...rates, "5m": 14 }, 30, 0.999).severity, "ticket", "the short window under: no page");
  t.equal(
    judgeBurn({ ...rates, "5m": null, "6h": 0.5 }, 30, 0.999).severity,
    null,
    "a window without checks never holds",
  );
});

async function world(t: Test, series: BackendName) {
  const ta = await testApp(t, { series, env: { WEBHOOK_ALLOW_HTTP_LOOPBACK: "true" } });
  const clock = { now: T0 };
  ta.ctx.now = () => new Date(clock.now);
  const w = await seedTenants(ta);
  const key = w.keys.alicePersonal;
  const id = w.conns.PA;
  const write = async (
    from: number,
    to: number,
    ok: (at: number) => boolean,
    o: { connectionId?: string; maintenance?: boolean } = {},
  ) => {
    const rows = [];
    for (let at = from; at < to; at += MIN)
      rows.push({
        ts: new Date(at),
        connection_id: o.connectionId ?? id,
        available: ok(at),
        response_time_ms: ok(at) ? 100 : null,
        status_code: ok(at) ? 200 : 503,
        reason: ok(at) ? null : "http_status",
        error: null,
        synthetic: false,
        source: "probe",
        maintenance: o.maintenance ?? false,
      });
    await ta.ctx.stores.series.append(availabilitySamples, rows);
    await ta.ctx.stores.series.waitVisible();
  };
  /** One minute passes: a check at its start with this outcome, then the job runs at its end. */
  const minute = async (ok: boolean) => {
    await write(clock.now, clock.now + 1, () => ok);
    clock.now += MIN;
    return runSloBurnChecks(ta.ctx);
  };
  const incidents = async () =>
    (await call(ta.app, key, "GET", `/v1/incidents?connection_id=${id}&kind=slo_burn&limit=100`)).json()
      .data as { id: string; status: string; kind: string }[];
  const alerts = async () =>
    (
      (await call(ta.app, key, "GET", `/v1/alerts?connection_id=${id}&limit=1000`)).json().data as {
        kind: string;
        channel: string;
        subject: string;
        incident_id: string | null;
      }[]
    ).filter((a) => a.channel === "email");
  const setSlo = (objective: number) =>
    call(ta.app, key, "PUT", `/v1/connections/${id}/slo`, { objective, window_days: 30 });
  return { ta, w, key, id, clock, write, minute, incidents, alerts, setSlo };
}

for (const series of ["pglite", "questdb"] as BackendName[]) {
  t.test(`a fast burn pages once and resolves minutes after it stops, no flapping (${series})`, async (t) => {
    if (!(await requireBackend(t, series))) return;
    const { minute, incidents, alerts, setSlo, write, clock, ta, id, key } = await world(t, series);
    // three healthy days of a check a minute
    await write(T0 - 3 * 1440 * MIN, T0, () => true);
    // 99 %: a budget of 432 failed checks in 30 days, of 43 in 3 days (the ticket's 10 %)
    t.equal((await setSlo(0.99)).statusCode, 200);
    t.match(await runSloBurnChecks(ta.ctx), { evaluated: 1, opened: 0 }, "healthy: evaluated, nothing opens");

    // ten minutes of failures: the 5 m burn rate is above 14.4x at once, the 1 h one from the
    // ninth failure (9 of 60 checks: 15x); 10 failures stay far from the 6x (6 h) and 1x (3 d) ones
    const runs = [];
    for (let i = 0; i < 10; i++) runs.push(await minute(false));
    t.same(
      runs.map((r) => r.opened),
      [0, 0, 0, 0, 0, 0, 0, 0, 1, 0],
      "the incident opens when both windows reach 14.4x, and once only",
    );
    let inc = await incidents();
    t.equal(inc.length, 1, "one slo_burn incident");
    t.equal(inc[0]?.status, "open");
    const burnAlerts = (await alerts()).filter((a) => a.kind === "slo_burn");
    t.equal(burnAlerts.length, 1, "one slo_burn alert in the alert history");
    t.match(burnAlerts[0]?.subject, /burning its error budget fast/, "a page");
    t.equal(burnAlerts[0]?.incident_id, inc[0]?.id);

    // the failures stop: the 5-minute window empties of failures after five healthy minutes
    const after = [];
    for (let i = 0; i < 40; i++) after.push(await minute(true));
    const resolvedAt = after.findIndex((r) => r.resolved === 1);
    t.equal(resolvedAt, 4, "resolved at the fifth healthy minute (the short window reset it)");
    t.equal(
      after.reduce((n, r) => n + r.opened, 0),
      0,
      "not reopened in the next 35 minutes, though the 1 h burn rate stays above 14.4x for most of them",
    );
    inc = await incidents();
    t.same(
      inc.map((i) => i.status),
      ["resolved"],
      "still one incident, resolved",
    );
    const recoveries = (await alerts()).filter((a) => a.kind === "recovery" && a.incident_id === inc[0]?.id);
    t.equal(recoveries.length, 1, "one recovery alert");
    const slo = (await call(ta.app, key, "GET", `/v1/connections/${id}/slo`)).json() as {
      burn_rates: Record<string, number | null>;
    };
    t.ok((slo.burn_rates["1h"] ?? 0) >= 14.4, "GET …/slo: the 1 h burn rate is still above 14.4x");
    t.equal(slo.burn_rates["5m"], 0, "while the 5 m one is 0: that is why it resolved");
    t.equal(clock.now, T0 + 50 * MIN);
  });

  t.test(
    `a page that spent a tenth of the 3-day budget stays open as a ticket until 6 h reset it (${series})`,
    async (t) => {
      if (!(await requireBackend(t, series))) return;
      const { minute, incidents, alerts, setSlo, write, clock, ta } = await world(t, series);
      await write(T0 - 3 * 1440 * MIN, T0, () => true);
      // 99.9 %: 10 failed checks are 23 % of the 30-day budget, far past the ticket's 10 % in 3 days
      t.equal((await setSlo(0.999)).statusCode, 200);
      let opened = 0;
      for (let i = 0; i < 10; i++) opened += (await minute(false)).opened;
      t.equal(opened, 1, "paged");
      let resolved = 0;
      for (let i = 0; i < 6; i++) resolved += (await minute(true)).resolved;
      t.equal(
        resolved,
        0,
        "the page's 5 m window reset, but the ticket's condition (3 d and 6 h at 1x) holds",
      );
      t.same(
        (await incidents()).map((i) => i.status),
        ["open"],
      );
      const sent = (await alerts()).length;
      // six hours of healthy checks later the 6 h window is clean
      await write(clock.now, clock.now + 360 * MIN, () => true);
      clock.now += 360 * MIN;
      t.match(await runSloBurnChecks(ta.ctx), { resolved: 1 }, "resolved once the 6 h window is clean");
      t.equal(
        (await alerts()).length,
        sent + 1,
        "nothing was sent for the step down from page to ticket; one recovery",
      );
    },
  );

  t.test(`a slow burn opens a ticket, then pages when it speeds up (${series})`, async (t) => {
    if (!(await requireBackend(t, series))) return;
    const { minute, incidents, alerts, setSlo, write, ta, key } = await world(t, series);
    // a PagerDuty channel: a ticket reaches it as a plain message, a page as a trigger
    const pd = await call(ta.app, key, "POST", "/v1/channels", {
      type: "pagerduty",
      name: "on-call",
      settings: { routing_key: "R0ut1ngKey0123456789abcdefABCDEF", api_url: "http://127.0.0.1:9/pd" },
    });
    t.equal(pd.statusCode, 201);
    // objective 99 %: one failure in every 50 checks for three days is a 2x burn over 3 d and 6 h,
    // and never 6x over 30 m nor 14.4x over 5 m: a ticket, not a page
    await write(T0 - 3 * 1440 * MIN, T0, (at) => Math.round((at - T0) / MIN) % 50 !== 0);
    t.equal((await setSlo(0.99)).statusCode, 200);
    t.match(await runSloBurnChecks(ta.ctx), { opened: 1 }, "the ticket condition holds: opened");
    let burn = (await alerts()).filter((a) => a.kind === "slo_burn");
    t.equal(burn.length, 1);
    t.match(burn[0]?.subject, /\(ticket\)/, "a ticket");
    const events = async () =>
      (
        await ta.ctx.stores.db.query<{ event: string | null; subject: string }>(
          "SELECT event, subject FROM notifications WHERE channel = 'pagerduty' ORDER BY created_at, subject",
        )
      ).rows;
    t.same(
      (await events()).map((e) => e.event),
      [],
      "a ticket does not reach PagerDuty (it would open an incident there that nothing closes)",
    );

    // now everything fails: 5 m and 1 h cross 14.4x within minutes (1 h needs 15 % of its checks)
    const runs = [];
    for (let i = 0; i < 12; i++) runs.push(await minute(false));
    t.equal(
      runs.reduce((n, r) => n + r.raised, 0),
      1,
      "raised to a page once",
    );
    t.equal(
      runs.reduce((n, r) => n + r.opened, 0),
      0,
      "the same incident: none opened",
    );
    burn = (await alerts()).filter((a) => a.kind === "slo_burn");
    t.equal(burn.length, 2, "a second slo_burn alert");
    t.match(burn.find((a) => /now paging/.test(a.subject))?.subject, /now paging/);
    t.same(
      (await events()).map((e) => e.event),
      ["trigger"],
      "the page triggers PagerDuty",
    );
    t.equal((await incidents()).length, 1, "one incident throughout");
  });

  t.test(
    `acknowledged: no more alerts while it burns; removing the SLO resolves it (${series})`,
    async (t) => {
      if (!(await requireBackend(t, series))) return;
      const { minute, incidents, alerts, setSlo, write, ta, key, id } = await world(t, series);
      await write(T0 - 3 * 1440 * MIN, T0, () => true);
      t.equal((await setSlo(0.999)).statusCode, 200);
      t.match(await minute(false), { opened: 1 });
      const [inc] = await incidents();
      const ack = await call(ta.app, key, "POST", `/v1/incidents/${inc?.id}/acknowledge`, {});
      t.equal(ack.statusCode, 200, "a person acknowledged it");
      const before = (await alerts()).length;
      t.match(await minute(false), { opened: 0, raised: 0 }, "still burning: nothing opened again");
      t.equal((await incidents()).length, 1);
      t.equal((await alerts()).length, before, "and nothing more sent while acknowledged");

      // removed and set again (looser) before the job ran: the new SLO does not burn, and the
      // incident the old one opened resolves all the same
      t.equal((await call(ta.app, key, "DELETE", `/v1/connections/${id}/slo`)).statusCode, 200);
      t.equal((await setSlo(0.9)).statusCode, 200);
      t.match(
        await minute(true),
        { evaluated: 1, resolved: 1 },
        "removed and set anew: the old incident resolves",
      );
      t.same(
        (await incidents()).map((i) => i.status),
        ["resolved"],
      );

      // burning again under the strict SLO, then removed: its incident resolves at the next run
      t.equal((await setSlo(0.999)).statusCode, 200);
      t.match(await minute(false), { opened: 1 });
      t.equal((await call(ta.app, key, "DELETE", `/v1/connections/${id}/slo`)).statusCode, 200);
      t.match(await minute(false), { evaluated: 0, resolved: 1 }, "the SLO removed: its incident resolves");
      t.same(
        (await incidents()).map((i) => i.status),
        ["resolved", "resolved"],
      );
    },
  );

  t.test(
    `a burn found under a maintenance window alerts at the first run after it (${series})`,
    async (t) => {
      if (!(await requireBackend(t, series))) return;
      const { incidents, setSlo, write, clock, ta, key, id } = await world(t, series);
      // ten failures just before the window, none since: the page (1 h, 5 m) and ticket (3 d, 6 h)
      // conditions hold when the SLO is set, under the window
      await write(T0 - 3 * 1440 * MIN, T0, (at) => at < T0 - 10 * MIN);
      const win = await call(ta.app, key, "POST", "/v1/maintenance-windows", {
        connection_ids: [id],
        starts_at: new Date(T0).toISOString(),
        ends_at: new Date(T0 + 20 * MIN).toISOString(),
      });
      t.equal(win.statusCode, 201, win.body);
      t.equal((await setSlo(0.999)).statusCode, 200);
      let opened = 0;
      // runs at T0 + 1 … 19 min, under the window (it ends at T0 + 20 min)
      for (let i = 0; i < 19; i++) {
        await write(clock.now, clock.now + 1, () => true, { maintenance: true });
        clock.now += MIN;
        opened += (await runSloBurnChecks(ta.ctx)).opened;
      }
      t.equal(opened, 0, "nothing opens under the window");
      t.equal((await incidents()).length, 0);
      await write(clock.now, clock.now + 1, () => true);
      clock.now += MIN;
      t.match(
        await runSloBurnChecks(ta.ctx),
        { opened: 1 },
        "a condition (6 h and 30 m, 3 d and 6 h) still holds after the window: the incident opens",
      );
    },
  );

  t.test(`one SLO whose decision fails does not hold up the others (${series})`, async (t) => {
    if (!(await requireBackend(t, series))) return;
    const { write, ta, key, id, w } = await world(t, series);
    const other = w.conns.OA;
    for (const c of [id, other]) {
      await write(T0 - 3 * 1440 * MIN, T0, (at) => at < T0 - 10 * MIN || at >= T0 - 5 * MIN, {
        connectionId: c,
      });
      const put = await call(
        ta.app,
        c === other ? w.keys.aliceOrgA : key,
        "PUT",
        `/v1/connections/${c}/slo`,
        {
          objective: 0.999,
          window_days: 30,
        },
      );
      t.equal(put.statusCode, 200, put.body);
    }
    // the database refuses to record a burn for the first one (a real trigger, as a failing store would)
    const db = ta.ctx.stores.db;
    await db.query(`CREATE FUNCTION refuse_burn() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'refused for the test'; END $$`);
    await db.query(`CREATE TRIGGER refuse_burn BEFORE UPDATE ON connection_slos FOR EACH ROW
      WHEN (NEW.connection_id = '${id}' AND NEW.burn_severity IS NOT NULL) EXECUTE FUNCTION refuse_burn()`);
    t.match(await runSloBurnChecks(ta.ctx), { evaluated: 2, failed: 1, opened: 1 }, "the other one opened");
    await db.query("DROP TRIGGER refuse_burn ON connection_slos");
    t.match(await runSloBurnChecks(ta.ctx), { failed: 0, opened: 1 }, "retried at the next run: it opens");
  });
}
