import type { AddressInfo } from "node:net";
import { SMTPServer } from "smtp-server";
import t, { type Test } from "tap";
import { openIncident, resolveIncident } from "../../src/incidents/incidents.js";
import { createLogger } from "../../src/lib/logger.js";
import { DeliveryJob, MAX_ATTEMPTS, retryDelayMs } from "../../src/notifications/delivery.js";
import { smtpMailer } from "../../src/notifications/mailer.js";
import { testApp } from "../helpers/app.js";
import { requireBackend } from "../helpers/backends.js";
import { call, seedTenants } from "../helpers/tenants.js";

/**
 * The timeline is append-only and in causal order, and records every event: opened, the e-mails
 * decided, each delivery attempt and its outcome (a refused one with its error and retry time,
 * then the one that went through, or the last one given up), acknowledged by whom, resolved and
 * why. Real SMTP on loopback; the clock is the context's.
 */

/** A real SMTP server on loopback that records what it accepts, and refuses on demand. */
async function smtp(t: Test) {
  const received: { to: string[]; data: string }[] = [];
  const control = { refuse: false };
  const server = new SMTPServer({
    disabledCommands: ["STARTTLS", "AUTH"],
    logger: false,
    onData(stream, session, callback) {
      let data = "";
      stream.on("data", (c: Buffer) => {
        data += c.toString();
      });
      stream.on("end", () => {
        if (control.refuse)
          return callback(Object.assign(new Error("try again later"), { responseCode: 451 }));
        received.push({ to: session.envelope.rcptTo.map((r) => r.address), data });
        callback();
      });
    },
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  return { url: `smtp://127.0.0.1:${(server.server.address() as AddressInfo).port}`, received, control };
}

interface Event {
  at: string;
  kind: string;
  detail: Record<string, unknown>;
}

for (const backend of ["pglite", "postgres"] as const) {
  t.test(
    `a failed then sent e-mail, acknowledgement and resolution in one timeline (${backend})`,
    async (t) => {
      if (!(await requireBackend(t, backend))) return;
      const ta = await testApp(t, { relational: backend });
      const w = await seedTenants(ta);
      const server = await smtp(t);
      // the business clock: an hour ahead of the wall clock the seeded audits were written at
      let clock = new Date(Math.ceil(Date.now() / 60_000) * 60_000 + 3_600_000);
      const T0 = clock;
      const at = (seconds: number) => new Date(T0.getTime() + seconds * 1000);
      const set = (d: Date) => {
        clock = d;
      };
      ta.ctx.now = () => clock;
      const job = new DeliveryJob(
        () => ta.ctx.stores.db,
        smtpMailer(server.url, "Vigil <alerts@vigil.example>"),
        createLogger("silent"),
        { now: () => ta.ctx.now() },
      );
      t.teardown(() => job.stop());
      await job.tick(); // the seeded audits go out first
      const audits = server.received.length;
      t.ok(audits > 0, "audit e-mails of the seeded keys and membership were sent");

      const target = {
        connectionId: w.conns.PA,
        connectionName: "alice n8n",
        userId: w.users.alice.id,
        organizationId: null,
      };
      const db = ta.ctx.stores.db;
      const id = await db.transaction((tx) =>
        openIncident(tx, target, {
          kind: "availability",
          title: "alice n8n is unavailable",
          detail: { failures: 3, reason: "timeout", error: "connect ETIMEDOUT" },
          at: T0,
          publicUrl: "https://vigil.example",
          failureMailIntervalSeconds: ta.ctx.config.alerts.failureMailIntervalSeconds,
        }),
      );
      if (!id) throw new Error("not opened");

      server.control.refuse = true;
      t.equal(await job.tick(), 0, "the SMTP server refuses the failure e-mail");
      set(at(10));
      t.equal(await job.tick(), 0, "not retried before its back-off");
      server.control.refuse = false;
      set(at(31));
      t.equal(await job.tick(), 1, "sent on the second attempt");
      t.equal(server.received.length, audits + 1);
      t.match(server.received.at(-1)?.data, /Subject: \[Vigil\] alice n8n is down/);

      set(at(60));
      const ack = await call(ta.app, w.keys.alicePersonal, "POST", `/v1/incidents/${id}/acknowledge`, {
        note: "restarting the instance",
      });
      t.equal(ack.statusCode, 200);
      set(at(120));
      await db.transaction((tx) =>
        resolveIncident(tx, target, {
          kind: "availability",
          detail: { successes: 2 },
          reason: "2 consecutive successful checks",
          at: at(120),
          publicUrl: "https://vigil.example",
        }),
      );
      set(at(121));
      t.equal(await job.tick(), 1, "the recovery e-mail");

      const incident = (await call(ta.app, w.keys.alicePersonal, "GET", `/v1/incidents/${id}`)).json() as {
        events: Event[];
      };
      const events = incident.events;
      t.same(
        events.map((e) => e.kind),
        [
          "opened",
          "notified",
          "delivery_failed",
          "delivered",
          "acknowledged",
          "resolved",
          "notified",
          "delivered",
        ],
        "every event, in causal order",
      );
      t.same(
        events.map((e) => e.at),
        [0, 0, 0, 31, 60, 120, 120, 121].map((s) => at(s).toISOString()),
        "each at the context's clock",
      );
      const [
        opened,
        notified,
        failed,
        delivered,
        acknowledged,
        resolved,
        notifiedRecovery,
        deliveredRecovery,
      ] = events;
      t.match(opened?.detail, { failures: 3, reason: "timeout", error: "connect ETIMEDOUT" });
      t.match(notified?.detail, {
        kind: "failure",
        channels: ["email"],
        recipients: 1,
        webhooks: 0,
        notification_ids: [String],
      });
      t.notOk("deferred_until" in (notified?.detail ?? {}), "the first failure e-mail is not deferred");
      const failureId = (notified?.detail.notification_ids as string[])[0];
      t.match(failed?.detail, {
        notification_id: failureId,
        kind: "failure",
        channel: "email",
        recipient: "alice@a.example",
        attempt: 1,
        error: /451|try again later/,
        retry_at: new Date(T0.getTime() + retryDelayMs(1)).toISOString(),
      });
      t.same(delivered?.detail, {
        notification_id: failureId,
        kind: "failure",
        channel: "email",
        recipient: "alice@a.example",
        attempt: 2,
      });
      t.match(acknowledged?.detail, {
        by: { type: "api_key", user_id: w.users.alice.id },
        note: "restarting the instance",
      });
      t.match(resolved?.detail, { successes: 2, reason: "2 consecutive successful checks", automatic: true });
      t.match(notifiedRecovery?.detail, { kind: "recovery", recipients: 1 });
      t.match(deliveredRecovery?.detail, { kind: "recovery", attempt: 1, recipient: "alice@a.example" });

      // the alert history has the same story, one row per e-mail
      const alerts = (
        await call(ta.app, w.keys.alicePersonal, "GET", `/v1/alerts?connection_id=${w.conns.PA}`)
      ).json() as { data: Record<string, unknown>[] };
      t.match(alerts.data, [
        { kind: "recovery", status: "sent", attempts: 1, incident_id: id, sent_at: at(121).toISOString() },
        {
          id: failureId,
          kind: "failure",
          channel: "email",
          recipient: "alice@a.example",
          subject: "[Vigil] alice n8n is down",
          status: "sent",
          attempts: 2,
          last_error: null,
          incident_id: id,
          connection_id: w.conns.PA,
          connection_name: "alice n8n",
          created_at: T0.toISOString(),
          sent_at: at(31).toISOString(),
        },
      ]);

      // append-only: a new delivery never rewrites what is there, and the sequence keeps the order
      const seqs = await db.query<{ seq: string | number }>(
        "SELECT seq FROM incident_events WHERE incident_id = $1 ORDER BY seq",
        [id],
      );
      t.equal(seqs.rows.length, 8);
    },
  );
}

t.test("an e-mail that never goes through: each attempt failed, the last given up", async (t) => {
  const ta = await testApp(t);
  const w = await seedTenants(ta);
  const server = await smtp(t);
  let clock = new Date(Math.ceil(Date.now() / 60_000) * 60_000 + 3_600_000);
  ta.ctx.now = () => clock;
  const job = new DeliveryJob(
    () => ta.ctx.stores.db,
    smtpMailer(server.url, "Vigil <alerts@vigil.example>"),
    createLogger("silent"),
    { now: () => ta.ctx.now() },
  );
  t.teardown(() => job.stop());
  await job.tick();
  server.control.refuse = true;
  const id = await ta.ctx.stores.db.transaction((tx) =>
    openIncident(
      tx,
      {
        connectionId: w.conns.OA,
        connectionName: "org A make",
        userId: w.users.alice.id,
        organizationId: w.orgs.orgA.id,
      },
      {
        kind: "missed_heartbeat",
        title: "x",
        detail: { silentSeconds: 300, lastHeartbeatAt: "t" },
        at: clock,
        publicUrl: "https://v",
      },
    ),
  );
  for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
    t.equal(await job.tick(), 0, `attempt ${attempt} refused`);
    clock = new Date(clock.getTime() + retryDelayMs(attempt) + 1000);
  }
  t.equal(await job.tick(), 0, "nothing more is tried");
  const events = (await call(ta.app, w.keys.alicePersonal, "GET", `/v1/incidents/${id}`)).json()
    .events as Event[];
  t.same(
    events.map((e) => e.kind),
    ["opened", "notified", ...Array(MAX_ATTEMPTS - 1).fill("delivery_failed"), "delivery_given_up"],
  );
  t.same(
    events.slice(2).map((e) => e.detail.attempt),
    Array.from({ length: MAX_ATTEMPTS }, (_, i) => i + 1),
  );
  const last = events.at(-1);
  t.match(last?.detail, { error: /451|try again later/, recipient: "alice@a.example" });
  t.notOk(last && "retry_at" in last.detail, "no retry after the last");
  const row = (
    await call(ta.app, w.keys.aliceOrgA, "GET", `/v1/alerts?connection_id=${w.conns.OA}&kind=failure`)
  ).json().data[0];
  t.match(row, {
    status: "failed",
    attempts: MAX_ATTEMPTS,
    last_error: /451|try again later/,
    incident_id: id,
  });
});
