import t, { type Test } from "tap";
import { openIncident, resolveIncident } from "../../src/incidents/incidents.js";
import { createLogger } from "../../src/lib/logger.js";
import { DeliveryJob, MAX_ATTEMPTS, retryDelayMs } from "../../src/notifications/delivery.js";
import { enqueueNotifications } from "../../src/notifications/repository.js";
import { deliverWebhooks } from "../../src/webhooks/delivery.js";
import { testApp } from "../helpers/app.js";
import { requireBackend } from "../helpers/backends.js";
import { call, seedTenants } from "../helpers/tenants.js";
import { receiver, verifyVigilSignature } from "./fixtures/receiver.js";

/**
 * Webhook delivery (issue #14, point 5; docs/webhooks.md) against a real HTTP receiver on
 * loopback: every alert of an account is POSTed to its webhooks, signed with the secret shown at
 * creation, retried with back-off, given up after the last attempt, never redirected, recorded in
 * the alert history and in the incident's timeline, and sent whether or not SMTP is configured.
 */

const TOKEN = "tok-3b1f-path-secret";

interface AlertRow {
  id: string;
  kind: string;
  subject: string;
  channel: string;
  recipient: string;
  status: string;
  attempts: number;
  last_error: string | null;
  created_at: string;
  due_at: string;
  incident_id: string | null;
  webhook_id: string | null;
}
interface Event {
  kind: string;
  detail: Record<string, unknown>;
}

/** An app on `backend` with loopback webhooks allowed, the tenants, a clock, a receiver and alice's webhook. */
async function world(t: Test, backend: "pglite" | "postgres" = "pglite") {
  let logged = "";
  const ta = await testApp(t, {
    relational: backend,
    env: { WEBHOOK_ALLOW_HTTP_LOOPBACK: "true", LOG_LEVEL: "info" },
    logTo: { write: (s: string) => ((logged += s), true) } as unknown as NodeJS.WritableStream,
  });
  const w = await seedTenants(ta);
  const clock = { now: new Date(Math.ceil(Date.now() / 60_000) * 60_000 + 3_600_000) };
  ta.ctx.now = () => clock.now;
  const rx = await receiver(t);
  const res = await call(ta.app, w.keys.alicePersonal, "POST", "/v1/webhooks", {
    url: `${rx.url}/hooks/alice/${TOKEN}`,
  });
  if (res.statusCode !== 201) throw new Error(`webhook: ${res.statusCode} ${res.body}`);
  const hook = res.json() as { id: string; secret: string; url: string };
  const advance = (ms: number) => (clock.now = new Date(clock.now.getTime() + ms));
  const targets = {
    PA: {
      connectionId: w.conns.PA,
      connectionName: "alice n8n",
      userId: w.users.alice.id,
      organizationId: null,
    },
    OA: {
      connectionId: w.conns.OA,
      connectionName: "org A make",
      userId: w.users.alice.id,
      organizationId: w.orgs.orgA.id,
    },
    PC: {
      connectionId: w.conns.PC,
      connectionName: "carol n8n",
      userId: w.users.carol.id,
      organizationId: null,
    },
  };
  const open = (target: keyof typeof targets) =>
    ta.ctx.stores.db.transaction((tx) =>
      openIncident(tx, targets[target], {
        kind: "availability",
        title: "down",
        detail: { failures: 3, error: "status 502" },
        at: clock.now,
        publicUrl: "https://vigil.example.com",
      }),
    );
  const alerts = async (key = w.keys.alicePersonal, query = "") => {
    const r = await call(ta.app, key, "GET", `/v1/alerts?limit=1000${query}`);
    t.equal(r.statusCode, 200, { body: r.body });
    return r.json().data as AlertRow[];
  };
  const events = async (id: string) =>
    (await call(ta.app, w.keys.alicePersonal, "GET", `/v1/incidents/${id}`)).json().events as Event[];
  return { ta, w, clock, advance, rx, hook, open, alerts, events, log: () => logged, targets };
}

for (const backend of ["pglite", "postgres"] as const) {
  t.test(
    `an alert is POSTed signed; a 500 is retried with back-off, then delivered (${backend})`,
    async (t) => {
      if (!(await requireBackend(t, backend))) return;
      const { ta, w, clock, advance, rx, hook, open, alerts, events, log } = await world(t, backend);
      rx.control.answers = [500];

      // no SMTP_URL: e-mails stay in the outbox, webhooks go out all the same
      const mail = new DeliveryJob(() => ta.ctx.stores.db, null, createLogger("silent"), { now: ta.ctx.now });
      const incident = await open("PA");
      t.ok(incident, "an incident opened");
      await mail.tick();

      const firstAt = clock.now;
      t.equal(await deliverWebhooks(ta.ctx), 0, "the first attempt fails");
      t.equal(rx.received.length, 1);
      let row = (await alerts()).find((a) => a.channel === "webhook");
      t.match(row, {
        kind: "failure",
        channel: "webhook",
        recipient: rx.url,
        webhook_id: hook.id,
        incident_id: incident,
        status: "pending",
        attempts: 1,
        last_error: "HTTP 500",
      });
      const retryAt = (
        await ta.ctx.stores.db.query<{ next_attempt_at: Date }>(
          "SELECT next_attempt_at FROM notifications WHERE id = $1",
          [row?.id],
        )
      ).rows[0]?.next_attempt_at;
      t.equal(new Date(retryAt as Date).getTime(), firstAt.getTime() + retryDelayMs(1), "retried after 30 s");

      advance(10_000);
      t.equal(await deliverWebhooks(ta.ctx), 0, "not before the back-off");
      t.equal(rx.received.length, 1);
      advance(21_000);
      t.equal(await deliverWebhooks(ta.ctx), 1, "delivered on retry");
      t.equal(rx.received.length, 2);
      t.equal(await deliverWebhooks(ta.ctx), 0, "and never again");

      // what the receiver got: a signed JSON POST, the same body both times
      const [first, second] = rx.received;
      t.equal(first?.body, second?.body, "a retry sends the same body");
      for (const [i, got] of rx.received.entries()) {
        t.equal(got.path, `/hooks/alice/${TOKEN}`, "posted to the URL as given");
        t.equal(got.headers["content-type"], "application/json");
        t.equal(got.headers["user-agent"], "Vigil-Webhook/1");
        t.equal(got.headers["vigil-delivery"], row?.id, "Vigil-Delivery: the notification id");
        t.equal(got.headers["vigil-attempt"], String(i + 1));
        const signature = String(got.headers["vigil-signature"]);
        t.match(signature, /^t=\d+,v1=[0-9a-f]{64}$/);
        const sentAt = i === 0 ? firstAt : clock.now;
        t.ok(
          verifyVigilSignature(got.body, signature, hook.secret, sentAt.getTime() / 1000),
          "the signature verifies with the secret shown at creation",
        );
        t.notOk(
          verifyVigilSignature(got.body, signature, "whsec_wrong", sentAt.getTime() / 1000),
          "not another",
        );
        t.notOk(
          verifyVigilSignature(`${got.body} `, signature, hook.secret, sentAt.getTime() / 1000),
          "nor a changed body",
        );
        t.notOk(
          verifyVigilSignature(got.body, signature, hook.secret, sentAt.getTime() / 1000 + 600),
          "nor an old request replayed",
        );
      }
      const payload = JSON.parse(second?.body ?? "{}") as Record<string, unknown>;
      t.same(Object.keys(payload).sort(), [
        "anomaly_id",
        "audit_event",
        "body",
        "connection_id",
        "connection_name",
        "created_at",
        "id",
        "incident_id",
        "kind",
        "subject",
        "text",
      ]);
      t.match(payload, {
        id: row?.id,
        kind: "failure",
        subject: "[Vigil] alice n8n is down",
        body: /alice n8n.*failed 3 consecutive checks/s,
        connection_id: w.conns.PA,
        connection_name: "alice n8n",
        incident_id: incident,
        anomaly_id: null,
        audit_event: null,
        created_at: firstAt.toISOString(),
      });
      t.equal(
        payload.text,
        `${String(payload.subject)}\n${String(payload.body)}`,
        "text: subject and body, for chat tools",
      );

      // the alert history and the timeline
      const rows = (await alerts()).filter((a) => a.incident_id === incident);
      t.same(rows.map((a) => a.channel).sort(), ["email", "webhook"], "one row per channel");
      row = rows.find((a) => a.channel === "webhook");
      t.match(row, { status: "sent", attempts: 2, last_error: null, recipient: rx.url });
      t.match(
        rows.find((a) => a.channel === "email"),
        { status: "pending", webhook_id: null },
      );
      const timeline = await events(incident as string);
      const deliveries = timeline.filter((e) => e.detail.channel === "webhook");
      t.match(deliveries, [
        {
          kind: "delivery_failed",
          detail: {
            attempt: 1,
            error: "HTTP 500",
            recipient: rx.url,
            notification_id: row?.id,
            retry_at: String,
          },
        },
        { kind: "delivered", detail: { attempt: 2, recipient: rx.url, notification_id: row?.id } },
      ]);

      // never the secret nor the URL's token in the API's answers or the log
      const everything = JSON.stringify(await alerts()) + JSON.stringify(timeline) + log();
      t.notOk(everything.includes(TOKEN), "the URL's token is nowhere");
      t.notOk(everything.includes(hook.secret), "nor the secret");
      t.match(log(), /webhook failed; will retry/, "the failure was logged");
    },
  );
}

t.test("a webhook that always fails is given up after the last attempt", async (t) => {
  const { ta, advance, rx, open, alerts, events } = await world(t);
  rx.control.answers = Array(MAX_ATTEMPTS + 5).fill(503) as number[];
  const incident = (await open("PA")) as string;
  for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
    t.equal(await deliverWebhooks(ta.ctx), 0, `attempt ${attempt} fails`);
    advance(retryDelayMs(attempt) + 1000);
  }
  t.equal(await deliverWebhooks(ta.ctx), 0);
  t.equal(rx.received.length, MAX_ATTEMPTS, "nothing more is tried");
  t.match(
    (await alerts()).find((a) => a.channel === "webhook"),
    { status: "failed", attempts: MAX_ATTEMPTS, last_error: "HTTP 503" },
  );
  const deliveries = (await events(incident)).filter((e) => e.detail.channel === "webhook");
  t.same(
    deliveries.map((e) => e.kind),
    [...Array(MAX_ATTEMPTS - 1).fill("delivery_failed"), "delivery_given_up"],
  );
  t.notOk("retry_at" in (deliveries.at(-1)?.detail ?? {}), "no retry after the last");
});

t.test("redirects are not followed; a receiver that does not answer times out", async (t) => {
  const { ta, advance, rx, open, alerts } = await world(t);
  rx.control.answers = [302];
  await open("PA");
  t.equal(await deliverWebhooks(ta.ctx), 0);
  t.same(
    rx.received.map((r) => r.path),
    [`/hooks/alice/${TOKEN}`],
    "one request: the Location was not followed",
  );
  t.match(
    (await alerts()).find((a) => a.channel === "webhook"),
    {
      status: "pending",
      last_error: "HTTP 302 (redirects are not followed)",
    },
  );

  rx.control.hang = true;
  advance(retryDelayMs(1) + 1000);
  const started = Date.now();
  t.equal(await deliverWebhooks(ta.ctx, { timeoutMs: 300 }), 0);
  t.ok(Date.now() - started < 5_000, "bounded by the timeout");
  t.match(
    (await alerts()).find((a) => a.channel === "webhook"),
    {
      status: "pending",
      attempts: 2,
      last_error: "timed out after 0.3 s",
    },
  );
  rx.control.hang = false;
});

t.test("fan-out: every webhook of the alert's account, none of another's; no e-mail needed", async (t) => {
  const { ta, w, rx, open, alerts } = await world(t);
  const app = ta.app;
  const orgHook = await call(app, w.keys.aliceOrgA, "POST", "/v1/webhooks", { url: `${rx.url}/hooks/org-a` });
  const carolHook = await call(app, w.keys.carolPersonal, "POST", "/v1/webhooks", {
    url: `${rx.url}/hooks/carol`,
  });
  t.equal(orgHook.statusCode, 201);
  t.equal(carolHook.statusCode, 201);

  await open("PA");
  await open("OA");
  await open("PC");
  // an alert with no e-mail recipient, naming only its connection: its account's webhooks still get it
  const ids = await ta.ctx.stores.db.transaction((tx) =>
    enqueueNotifications(tx, {
      kind: "anomaly",
      connectionId: w.conns.PA,
      recipients: [],
      subject: "[Vigil] anomaly on alice n8n",
      body: "latency is up",
      at: ta.ctx.now(),
    }),
  );
  t.equal(ids.length, 1, "one row: the webhook's");
  t.equal(await deliverWebhooks(ta.ctx), 4);
  const got = rx.received.map((r) => [r.path, (JSON.parse(r.body) as { subject: string }).subject]).sort();
  t.same(
    got,
    [
      [`/hooks/alice/${TOKEN}`, "[Vigil] alice n8n is down"],
      [`/hooks/alice/${TOKEN}`, "[Vigil] anomaly on alice n8n"],
      ["/hooks/carol", "[Vigil] carol n8n is down"],
      ["/hooks/org-a", "[Vigil] org A make is down"],
    ],
    "each account's alerts to its own webhooks only",
  );
  const anomaly = (await alerts()).find((a) => a.kind === "anomaly");
  t.match(anomaly, { channel: "webhook", status: "sent", recipient: rx.url });
  t.notOk(
    (await alerts(w.keys.carolPersonal)).some((a) => a.webhook_id === (orgHook.json() as { id: string }).id),
    "carol sees none of org A's deliveries",
  );
});

t.test("a deleted webhook's undelivered alerts are given up, never sent", async (t) => {
  const { ta, w, rx, hook, open, alerts, events } = await world(t);
  const incident = (await open("PA")) as string;
  const del = await call(ta.app, w.keys.alicePersonal, "DELETE", `/v1/webhooks/${hook.id}`);
  t.equal(del.statusCode, 200);
  t.equal(await deliverWebhooks(ta.ctx), 0);
  t.equal(rx.received.length, 0, "nothing posted");
  t.match(
    (await alerts()).find((a) => a.channel === "webhook"),
    {
      status: "failed",
      last_error: "not sent: the webhook was deleted",
      webhook_id: null,
      recipient: rx.url,
    },
  );
  t.match(
    (await events(incident)).filter((e) => e.detail.channel === "webhook"),
    [{ kind: "delivery_given_up", detail: { error: "not sent: the webhook was deleted" } }],
  );

  // removed while its alert was already claimed (another node's delete): given up at delivery
  const again = await call(ta.app, w.keys.alicePersonal, "POST", "/v1/webhooks", {
    url: `${rx.url}/hooks/two`,
  });
  t.equal(again.statusCode, 201);
  await ta.ctx.stores.db.transaction((tx) =>
    enqueueNotifications(tx, {
      kind: "failure",
      connectionId: w.conns.PA,
      recipients: [],
      subject: "s",
      body: "b",
      at: ta.ctx.now(),
    }),
  );
  await ta.ctx.stores.db.query("DELETE FROM webhooks");
  t.equal(await deliverWebhooks(ta.ctx), 0);
  t.equal(rx.received.length, 0);
  t.match(
    (await alerts()).find((a) => a.subject === "s"),
    {
      status: "failed",
      attempts: 1,
      last_error: "not sent: the webhook was deleted",
    },
  );
});

t.test("noise control treats webhook rows like e-mails: deferred and withheld alike", async (t) => {
  const { ta, advance, rx, open, targets, alerts } = await world(t);
  const db = ta.ctx.stores.db;
  const resolve = () =>
    db.transaction((tx) =>
      resolveIncident(tx, targets.PA, {
        kind: "availability",
        detail: {},
        at: ta.ctx.now(),
        publicUrl: "https://vigil.example.com",
      }),
    );
  await open("PA");
  advance(60_000);
  await resolve();
  advance(60_000);
  await open("PA"); // within the failure e-mail interval: deferred
  advance(60_000);
  await resolve(); // before it was due: withheld
  const rows = (await alerts()).filter((a) => a.kind !== "audit");
  const byChannel = (channel: string) =>
    rows
      .filter((a) => a.channel === channel)
      .map((a) => [a.kind, a.created_at, a.due_at, a.status])
      .sort();
  t.same(byChannel("webhook"), byChannel("email"), "the same alerts, due and withheld alike");
  t.ok(
    rows.some((a) => a.channel === "webhook" && a.status === "suppressed"),
    "the deferred failure's webhook row is withheld",
  );
  await deliverWebhooks(ta.ctx);
  const withheld = rows.filter((a) => a.channel === "webhook" && a.status === "suppressed").map((a) => a.id);
  const posted = rx.received.map((r) => r.headers["vigil-delivery"]);
  t.notOk(
    withheld.some((id) => posted.includes(id)),
    "a withheld alert is never posted",
  );
  t.equal(posted.length, rows.filter((a) => a.channel === "webhook" && a.status === "pending").length);
});
