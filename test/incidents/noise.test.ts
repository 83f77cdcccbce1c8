import t from "tap";
import { type IncidentTarget, openIncident, resolveIncident } from "../../src/incidents/incidents.js";
import { createLogger } from "../../src/lib/logger.js";
import { DeliveryJob } from "../../src/notifications/delivery.js";
import type { Mail, Mailer } from "../../src/notifications/mailer.js";
import { type TestApp, testApp } from "../helpers/app.js";
import { requireBackend } from "../helpers/backends.js";
import { call, seedTenants } from "../helpers/tenants.js";

/**
 * Noise control (issue #14, point 6): at most one failure e-mail per connection every
 * ALERT_FAILURE_MAIL_INTERVAL_SECONDS. A failure e-mail decided sooner waits for the end of the
 * interval; if its incident resolves (or is acknowledged) first it is withheld, recorded in the
 * timeline as suppressed, and so is the recovery e-mail. Acknowledged incidents get no reminder.
 */

/** Records what it is asked to send (the SMTP path itself is tested with a real server elsewhere). */
function recordingMailer(): Mailer & { sent: (Mail & { at: Date })[]; clock: () => Date } {
  const m = {
    sent: [] as (Mail & { at: Date })[],
    clock: () => new Date(),
    async send(mail: Mail) {
      m.sent.push({ ...mail, at: m.clock() });
    },
    close() {},
  };
  return m;
}

function harness(ta: TestApp, start: Date) {
  let clock = start;
  ta.ctx.now = () => clock;
  const mailer = recordingMailer();
  mailer.clock = () => clock;
  const job = new DeliveryJob(() => ta.ctx.stores.db, mailer, createLogger("silent"), {
    now: () => ta.ctx.now(),
  });
  const db = ta.ctx.stores.db;
  return {
    mailer,
    set: (minutes: number) => {
      clock = new Date(start.getTime() + minutes * 60_000);
      return clock;
    },
    deliver: () => job.tick(),
    open: async (target: IncidentTarget) =>
      (await db.transaction((tx) =>
        openIncident(tx, target, {
          kind: "availability",
          title: `${target.connectionName} is unavailable`,
          detail: { failures: 3, reason: "timeout" },
          at: clock,
          publicUrl: "https://vigil.example",
          failureMailIntervalSeconds: ta.ctx.config.alerts.failureMailIntervalSeconds,
        }),
      )) as string,
    resolve: (target: IncidentTarget) =>
      db.transaction((tx) =>
        resolveIncident(tx, target, {
          kind: "availability",
          detail: { successes: 2 },
          at: clock,
          publicUrl: "https://vigil.example",
        }),
      ),
  };
}

const kinds = (events: { kind: string }[]) => events.map((e) => e.kind);

for (const backend of ["pglite", "postgres"] as const) {
  t.test(`a flapping connection: at most one failure e-mail per interval (${backend})`, async (t) => {
    if (!(await requireBackend(t, backend))) return;
    const ta = await testApp(t, { relational: backend });
    t.equal(ta.ctx.config.alerts.failureMailIntervalSeconds, 900, "the default interval is 900 s");
    const w = await seedTenants(ta);
    const start = new Date(Math.ceil(Date.now() / 60_000) * 60_000 + 3_600_000);
    const h = harness(ta, start);
    await h.deliver(); // the seeded audits
    h.mailer.sent.length = 0;
    const pa: IncidentTarget = {
      connectionId: w.conns.PA,
      connectionName: "alice n8n",
      userId: w.users.alice.id,
      organizationId: null,
    };
    const get = async (id: string) =>
      (await call(ta.app, w.keys.alicePersonal, "GET", `/v1/incidents/${id}`)).json() as {
        status: string;
        events: { kind: string; at: string; detail: Record<string, unknown> }[];
      };

    const first = await h.open(pa); // minute 0: the failure e-mail goes at once
    h.set(1);
    await h.resolve(pa);
    h.set(2);
    const second = await h.open(pa); // minute 2: within 15 min of the first failure e-mail
    const deferred = (await get(second)).events[1];
    t.match(deferred, {
      kind: "notified",
      detail: {
        kind: "failure",
        deferred_until: new Date(start.getTime() + 15 * 60_000).toISOString(),
        reason: "at most one failure e-mail per connection every 900 s",
      },
    });
    h.set(3);
    await h.deliver();
    t.same(
      h.mailer.sent.map((m) => m.subject),
      ["[Vigil] alice n8n is down", "[Vigil] alice n8n has recovered"],
      "the first incident's e-mails; the second's failure e-mail waits",
    );
    h.set(4);
    await h.resolve(pa); // resolved before its failure e-mail was due: both withheld
    const s = await get(second);
    t.same(kinds(s.events), ["opened", "notified", "resolved", "suppressed", "suppressed"]);
    t.match(s.events[3], {
      kind: "suppressed",
      detail: {
        kind: "failure",
        reason: "the incident resolved before it was due",
        notification_ids: [String],
      },
    });
    t.match(s.events[4], {
      kind: "suppressed",
      detail: { kind: "recovery", reason: "no e-mail told of the incident, so none tells of its end" },
    });

    h.set(5);
    const third = await h.open(pa); // still within the interval of the first: waits until minute 15
    h.set(10);
    await h.deliver();
    t.equal(h.mailer.sent.length, 2, "nothing before the interval ends");
    h.set(15);
    await h.deliver();
    t.equal(h.mailer.sent.length, 3, "the third incident's failure e-mail at the end of the interval");
    t.equal(h.mailer.sent[2]?.at.toISOString(), new Date(start.getTime() + 15 * 60_000).toISOString());
    t.same(kinds((await get(third)).events), ["opened", "notified", "delivered"]);
    t.same(kinds((await get(first)).events), [
      "opened",
      "notified",
      "resolved",
      "notified",
      "delivered",
      "delivered",
    ]);

    // the alert history lists the withheld one, as suppressed, with the time it was due
    const alerts = (
      await call(ta.app, w.keys.alicePersonal, "GET", `/v1/alerts?connection_id=${w.conns.PA}&kind=failure`)
    ).json().data as Record<string, unknown>[];
    t.match(
      alerts.map((a) => [a.incident_id, a.status, a.due_at]),
      [
        [third, "sent", new Date(start.getTime() + 15 * 60_000).toISOString()],
        [second, "suppressed", new Date(start.getTime() + 15 * 60_000).toISOString()],
        [first, "sent", start.toISOString()],
      ],
    );
    const due = alerts
      .filter((a) => a.status !== "suppressed")
      .map((a) => Date.parse(String(a.due_at)))
      .reverse();
    for (let i = 1; i < due.length; i++)
      t.ok(
        (due[i] ?? 0) - (due[i - 1] ?? 0) >= 900_000,
        "failure e-mails are due at least the interval apart",
      );

    // the interval is per connection: another connection's failure goes at once
    h.set(16);
    const oa: IncidentTarget = {
      connectionId: w.conns.OA,
      connectionName: "org A make",
      userId: w.users.alice.id,
      organizationId: w.orgs.orgA.id,
    };
    const other = await h.open(oa);
    t.notOk("deferred_until" in ((await get(other)).events[1]?.detail ?? {}), "not deferred");
  });
}

t.test(
  "acknowledged incidents get no reminder; a deferred e-mail is withheld on acknowledgement",
  async (t) => {
    const ta = await testApp(t);
    const w = await seedTenants(ta);
    const start = new Date(Math.ceil(Date.now() / 60_000) * 60_000 + 3_600_000);
    const h = harness(ta, start);
    await h.deliver();
    h.mailer.sent.length = 0;
    const pa: IncidentTarget = {
      connectionId: w.conns.PA,
      connectionName: "alice n8n",
      userId: w.users.alice.id,
      organizationId: null,
    };
    const rowsOf = async (incident: string) =>
      (
        await ta.ctx.stores.db.query<{ kind: string; status: string }>(
          "SELECT kind, status FROM notifications WHERE incident_id = $1 ORDER BY created_at, kind",
          [incident],
        )
      ).rows.map((r) => [r.kind, r.status]);

    // an acknowledged incident that stays open: its one failure e-mail, then nothing for hours
    const long = await h.open(pa);
    await h.deliver();
    h.set(1);
    t.equal(
      (await call(ta.app, w.keys.alicePersonal, "POST", `/v1/incidents/${long}/acknowledge`, {})).statusCode,
      200,
    );
    for (let m = 2; m <= 6 * 60; m += 30) {
      h.set(m);
      await h.deliver();
    }
    t.same(await rowsOf(long), [["failure", "sent"]], "no reminder in six hours");
    t.equal(h.mailer.sent.length, 1);
    h.set(6 * 60 + 1);
    await h.resolve(pa);
    await h.deliver();
    t.same(await rowsOf(long), [
      ["failure", "sent"],
      ["recovery", "sent"],
    ]);

    // a failure e-mail waiting for the interval is withheld when someone acknowledges first
    h.set(6 * 60 + 2);
    await h.open(pa); // sent at once: the last failure e-mail was six hours ago
    h.set(6 * 60 + 3);
    await h.resolve(pa);
    h.set(6 * 60 + 4);
    const flap = await h.open(pa); // waits until 6 h 17 min
    h.set(6 * 60 + 5);
    const ack = await call(ta.app, w.keys.alicePersonal, "POST", `/v1/incidents/${flap}/acknowledge`, {
      note: "known flapping",
    });
    t.equal(ack.statusCode, 200);
    t.same(kinds(ack.json().events), ["opened", "notified", "acknowledged", "suppressed"]);
    t.match(ack.json().events[3].detail, {
      kind: "failure",
      reason: "the incident was acknowledged before it was due",
    });
    for (let m = 6 * 60 + 6; m <= 8 * 60; m += 20) {
      h.set(m);
      await h.deliver();
    }
    t.same(await rowsOf(flap), [["failure", "suppressed"]], "never sent, no reminder");
    h.set(8 * 60 + 1);
    await h.resolve(pa);
    t.same(kinds((await call(ta.app, w.keys.alicePersonal, "GET", `/v1/incidents/${flap}`)).json().events), [
      "opened",
      "notified",
      "acknowledged",
      "suppressed",
      "resolved",
      "suppressed",
    ]);
    t.same(await rowsOf(flap), [["failure", "suppressed"]], "and no recovery e-mail for it");
  },
);

t.test("ALERT_FAILURE_MAIL_INTERVAL_SECONDS=0 sends every failure e-mail at once", async (t) => {
  const ta = await testApp(t, { env: { ALERT_FAILURE_MAIL_INTERVAL_SECONDS: "0" } });
  t.equal(ta.ctx.config.alerts.failureMailIntervalSeconds, 0);
  const w = await seedTenants(ta);
  const start = new Date(Math.ceil(Date.now() / 60_000) * 60_000 + 3_600_000);
  const h = harness(ta, start);
  const pa: IncidentTarget = {
    connectionId: w.conns.PA,
    connectionName: "alice n8n",
    userId: w.users.alice.id,
    organizationId: null,
  };
  for (let i = 0; i < 3; i++) {
    h.set(i * 2);
    await h.open(pa);
    h.set(i * 2 + 1);
    await h.resolve(pa);
  }
  const due = await ta.ctx.stores.db.query<{ n: string | number }>(
    "SELECT count(*) AS n FROM notifications WHERE connection_id = $1 AND kind = 'failure' AND due_at = created_at",
    [w.conns.PA],
  );
  t.equal(Number(due.rows[0]?.n), 3, "three failure e-mails, none deferred");
});
