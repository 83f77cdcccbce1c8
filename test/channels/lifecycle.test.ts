import http from "node:http";
import type { AddressInfo } from "node:net";
import t, { type Test } from "tap";
import { deliverChannels } from "../../src/channels/delivery.js";
import { runEscalations } from "../../src/channels/escalation.js";
import { openIncident, resolveIncident } from "../../src/incidents/incidents.js";
import { testApp } from "../helpers/app.js";
import { requireBackend } from "../helpers/backends.js";
import { call, seedTenants } from "../helpers/tenants.js";

/**
 * Channels through a whole incident (issue #31, points 1, 2, 3, 5): one receiver on loopback
 * plays every provider at its documented path and answers as the provider does; Vigil's outbox
 * delivers an incident's opening, acknowledgement and resolution to the channels routing picks,
 * in order, and the timeline and alert history record each attempt.
 */

interface Got {
  path: string;
  headers: http.IncomingHttpHeaders;
  body: string;
  json: Record<string, unknown> | null;
}

/** A receiver for every provider: answers per path like the provider; `control.next[prefix]` overrides one answer. */
async function providers(t: Test) {
  const got: Got[] = [];
  const control = {
    next: {} as Record<string, { status: number; headers?: Record<string, string>; body?: string }[]>,
  };
  const server = http.createServer((req, res) => {
    let body = "";
    req.setEncoding("utf8");
    req.on("data", (c: string) => (body += c));
    req.on("end", () => {
      const path = req.url ?? "";
      let json: Record<string, unknown> | null;
      try {
        json = JSON.parse(body) as Record<string, unknown>;
      } catch {
        json = null;
      }
      got.push({ path, headers: req.headers, body, json });
      const prefix = Object.keys(control.next).find((p) => path.startsWith(p));
      const forced = prefix ? control.next[prefix]?.shift() : undefined;
      if (forced) {
        res.writeHead(forced.status, { "content-type": "application/json", ...(forced.headers ?? {}) });
        res.end(forced.body ?? "{}");
        return;
      }
      if (path.startsWith("/pd/v2/enqueue")) {
        res.writeHead(202, { "content-type": "application/json" });
        res.end(
          JSON.stringify({ status: "success", message: "Event processed", dedup_key: json?.dedup_key }),
        );
      } else if (path.startsWith("/og/v2/alerts")) {
        res.writeHead(202, { "content-type": "application/json" });
        res.end(JSON.stringify({ result: "Request will be processed", took: 0.01, requestId: "r-1" }));
      } else if (path.startsWith("/tg/bot")) {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ ok: true, result: { message_id: got.length, chat: { id: 42 }, date: 1 } }));
      } else if (path.startsWith("/discord")) {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ id: String(got.length), type: 0 }));
      } else {
        res.writeHead(200, { "content-type": "text/plain" });
        res.end("ok");
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  t.teardown(
    () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  );
  return { url, got, control };
}

const BOT = "123456:AAF-secret-bot-token_abcdefghijklmnopq";
const ROUTING_KEY = "R0ut1ngKey0123456789abcdefABCDEF";
const OPSGENIE_KEY = "0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0";

async function world(t: Test, backend: "pglite" | "postgres") {
  const ta = await testApp(t, { relational: backend, env: { WEBHOOK_ALLOW_HTTP_LOOPBACK: "true" } });
  const w = await seedTenants(ta);
  const clock = { now: new Date(Math.ceil(Date.now() / 60_000) * 60_000 + 3_600_000) };
  ta.ctx.now = () => clock.now;
  const advance = (ms: number) => (clock.now = new Date(clock.now.getTime() + ms));
  const rx = await providers(t);
  const key = w.keys.alicePersonal;
  const make = async (type: string, settings: Record<string, unknown>, name = type) => {
    const res = await call(ta.app, key, "POST", "/v1/channels", { type, name, settings });
    if (res.statusCode !== 201) throw new Error(`channel ${type}: ${res.statusCode} ${res.body}`);
    return (res.json() as { id: string }).id;
  };
  const target = {
    connectionId: w.conns.PA,
    connectionName: "alice n8n",
    userId: w.users.alice.id,
    organizationId: null,
  };
  const open = (kind: "availability" | "missed_heartbeat" = "availability") =>
    ta.ctx.stores.db.transaction((tx) =>
      openIncident(tx, target, {
        kind,
        title: "alice n8n is down",
        detail:
          kind === "availability"
            ? { failures: 3, error: "status 502" }
            : { silentSeconds: 300, lastHeartbeatAt: "x" },
        at: clock.now,
        publicUrl: "https://vigil.example.com",
      }),
    );
  const resolve = (kind: "availability" | "missed_heartbeat" = "availability") =>
    ta.ctx.stores.db.transaction((tx) =>
      resolveIncident(tx, target, {
        kind,
        detail: {},
        at: clock.now,
        publicUrl: "https://vigil.example.com",
      }),
    );
  const events = async (id: string) =>
    (await call(ta.app, key, "GET", `/v1/incidents/${id}`)).json().events as {
      kind: string;
      detail: Record<string, unknown>;
    }[];
  const alerts = async () =>
    (await call(ta.app, key, "GET", "/v1/alerts?limit=1000")).json().data as {
      kind: string;
      channel: string;
      channel_id: string | null;
      status: string;
      attempts: number;
      last_error: string | null;
      recipient: string;
    }[];
  return { ta, w, clock, advance, rx, key, make, open, resolve, events, alerts };
}

for (const backend of ["pglite", "postgres"] as const) {
  t.test(`an incident's lifecycle reaches every provider in order (${backend})`, async (t) => {
    if (!(await requireBackend(t, backend))) return;
    const { ta, rx, key, make, open, resolve, events, alerts, advance } = await world(t, backend);
    const ids = {
      slack: await make("slack", { webhook_url: `${rx.url}/slack/T000/B000/XXXXsecret` }),
      teams: await make("teams", { webhook_url: `${rx.url}/teams/workflows/secret` }),
      discord: await make("discord", { webhook_url: `${rx.url}/discord/api/webhooks/1/secret` }),
      pagerduty: await make("pagerduty", { routing_key: ROUTING_KEY, api_url: `${rx.url}/pd` }),
      opsgenie: await make("opsgenie", { api_key: OPSGENIE_KEY, api_url: `${rx.url}/og` }),
      telegram: await make("telegram", {
        bot_token: BOT,
        chat_id: "-1001234567890",
        api_url: `${rx.url}/tg`,
      }),
      ntfy: await make("ntfy", { topic_url: `${rx.url}/ntfy/vigil-alerts-x1`, priority: 5 }),
    };

    const incident = await open();
    t.ok(incident, "an incident opened");
    t.equal(await deliverChannels(ta.ctx), 7, "the failure reached all 7 channels (no rule: all of them)");
    const paths = rx.got.map((g) => g.path);
    t.ok(
      paths.some((p) => p.startsWith("/slack/")),
      "Slack",
    );
    t.ok(
      paths.some((p) => p.startsWith("/teams/")),
      "Teams",
    );
    t.ok(
      paths.some((p) => p.startsWith("/discord/")),
      "Discord",
    );
    t.ok(paths.includes(`/tg/bot${BOT}/sendMessage`), "Telegram sendMessage");
    t.ok(
      paths.some((p) => p.startsWith("/ntfy/vigil-alerts-x1")),
      "ntfy topic",
    );
    const pd = () => rx.got.filter((g) => g.path === "/pd/v2/enqueue").map((g) => g.json ?? {});
    const og = () => rx.got.filter((g) => g.path.startsWith("/og/v2/alerts"));
    t.match(pd(), [{ event_action: "trigger", routing_key: ROUTING_KEY }], "PagerDuty: one trigger");
    t.match(
      String(pd()[0]?.dedup_key),
      new RegExp(String(incident)),
      "PagerDuty's dedup_key holds the incident id",
    );
    t.equal(og().length, 1, "Opsgenie: one create");
    t.equal(og()[0]?.path, "/og/v2/alerts", "Opsgenie create path");
    t.match(
      String(og()[0]?.json?.alias),
      new RegExp(String(incident)),
      "Opsgenie's alias holds the incident id",
    );
    t.equal(og()[0]?.headers.authorization, `GenieKey ${OPSGENIE_KEY}`, "Opsgenie's GenieKey header");
    const slack = rx.got.find((g) => g.path.startsWith("/slack/"))?.json as {
      blocks?: unknown[];
      text?: string;
    };
    t.ok(Array.isArray(slack.blocks) && slack.blocks.length > 0, "Slack: Block Kit blocks");
    t.match(slack.text, /alice n8n/, "Slack: the connection is named");
    t.ok(
      JSON.stringify(slack.blocks).includes(`${ta.ctx.config.publicUrl}/incidents/${String(incident)}`),
      "Slack: a button opens the incident's dashboard page",
    );

    // acknowledged in Vigil: the paging providers acknowledge; chat channels are not told
    const before = rx.got.length;
    advance(60_000);
    const ack = await call(ta.app, key, "POST", `/v1/incidents/${incident}/acknowledge`, { note: "on it" });
    t.equal(ack.statusCode, 200, { body: ack.body });
    t.equal(await deliverChannels(ta.ctx), 2, "two acknowledgements");
    const acked = rx.got.slice(before);
    t.same(
      acked.map((g) => (g.path.startsWith("/pd/") ? "pd" : g.path)).sort(),
      [
        "pd",
        `/og/v2/alerts/${encodeURIComponent(String(og()[0]?.json?.alias))}/acknowledge?identifierType=alias`,
      ].sort(),
      "PagerDuty acknowledge and Opsgenie acknowledge by alias, nothing else",
    );

    // resolved: the paging providers resolve (close); chat channels get the recovery
    advance(60_000);
    await resolve();
    t.equal(await deliverChannels(ta.ctx), 7, "the recovery reached the 7 channels");
    t.same(
      pd().map((e) => e.event_action),
      ["trigger", "acknowledge", "resolve"],
      "PagerDuty saw trigger, acknowledge, resolve in order",
    );
    t.equal(new Set(pd().map((e) => e.dedup_key)).size, 1, "one dedup_key throughout");
    t.match(
      og().map((g) => g.path.split("?")[0]?.split("/").pop()),
      ["alerts", "acknowledge", "close"],
      "Opsgenie: create, acknowledge, close",
    );

    const timeline = await events(String(incident));
    const delivered = timeline.filter((e) => e.kind === "delivered");
    t.equal(delivered.length, 16, "16 deliveries in the timeline (7 + 2 + 7)");
    t.same(
      [...new Set(delivered.map((e) => e.detail.channel))].sort(),
      ["discord", "ntfy", "opsgenie", "pagerduty", "slack", "teams", "telegram"],
      "each delivery names its channel type",
    );
    const history = (await alerts()).filter((a) => a.channel_id !== null);
    t.equal(history.length, 16);
    t.ok(
      history.every((a) => a.status === "sent" && a.attempts === 1),
      "all sent at the first attempt",
    );
    t.ok(
      history.some((a) => a.kind === "acknowledged"),
      "the acknowledgements are in the alert history",
    );
    t.notOk(JSON.stringify(await alerts()).includes(BOT), "the alert history never shows the bot token");
    t.equal(await deliverChannels(ta.ctx), 0, "nothing is sent twice");
    void ids;
  });

  t.test(
    `a rate limit holds one channel's queue only; a refusal gives up at once (${backend})`,
    async (t) => {
      if (!(await requireBackend(t, backend))) return;
      const { ta, rx, make, open, resolve, alerts, advance } = await world(t, backend);
      await make("slack", { webhook_url: `${rx.url}/slack/T1/B1/secret` });
      await make("ntfy", { topic_url: `${rx.url}/ntfy/topic-a1` });
      await make("pagerduty", { routing_key: ROUTING_KEY, api_url: `${rx.url}/pd` });
      rx.control.next["/slack/"] = [{ status: 429, headers: { "retry-after": "120" }, body: "rate_limited" }];
      rx.control.next["/pd/"] = [
        {
          status: 400,
          body: JSON.stringify({
            status: "invalid event",
            message: "Event object is invalid",
            errors: ["Length of 'routing_key' is incorrect (should be 32 characters)"],
          }),
        },
      ];
      await open();
      advance(1_000);
      await resolve();
      t.equal(
        await deliverChannels(ta.ctx),
        3,
        "ntfy got both; PagerDuty's resolve went out after its trigger was refused",
      );
      let rows = await alerts();
      const slack = rows.filter((a) => a.channel === "slack");
      t.equal(slack.length, 2);
      t.ok(
        slack.every((a) => a.status === "pending"),
        "both Slack alerts wait",
      );
      t.match(slack.map((a) => a.last_error).filter(Boolean), [/429/], "the first one says why");
      const pd = rows.filter((a) => a.channel === "pagerduty").sort((a, b) => a.kind.localeCompare(b.kind));
      t.match(pd, [
        { kind: "failure", status: "failed", attempts: 1, last_error: /400/ },
        { kind: "recovery", status: "sent" },
      ]);

      advance(60_000);
      t.equal(await deliverChannels(ta.ctx), 0, "Slack asked for 120 s: nothing before");
      advance(61_000);
      t.equal(await deliverChannels(ta.ctx), 2, "then both, in order");
      const slackBodies = rx.got
        .filter((g) => g.path.startsWith("/slack/"))
        .map((g) => String((g.json as { text?: string })?.text));
      t.equal(slackBodies.length, 3, "one refused, then two");
      t.match(slackBodies[1], /down/i, "the failure first");
      t.match(slackBodies[2], /recovered/i, "then the recovery");
      rows = await alerts();
      t.ok(rows.filter((a) => a.channel === "slack").every((a) => a.status === "sent"));
    },
  );

  t.test(
    `routing rules pick channels; escalation and reminders stop on acknowledgement (${backend})`,
    async (t) => {
      if (!(await requireBackend(t, backend))) return;
      const { ta, rx, key, make, open, resolve, events, alerts, advance } = await world(t, backend);
      const slack = await make("slack", { webhook_url: `${rx.url}/slack/T2/B2/secret` });
      const pagerduty = await make("pagerduty", { routing_key: ROUTING_KEY, api_url: `${rx.url}/pd` });
      const hb = await call(ta.app, key, "POST", "/v1/routing-rules", {
        channel_ids: [slack],
        kinds: ["missed_heartbeat"],
        send_recoveries: false,
        escalate_after_minutes: 5,
        repeat_every_minutes: 10,
        escalation_channel_ids: [pagerduty],
      });
      t.equal(hb.statusCode, 201, { body: hb.body });

      // an availability failure matches no rule: e-mail only
      const down = await open("availability");
      await deliverChannels(ta.ctx);
      t.equal(rx.got.length, 0, "no channel got the availability failure");
      t.ok((await alerts()).filter((a) => a.channel_id !== null).length === 0, "no channel rows");
      t.ok(
        (await alerts()).some((a) => a.channel === "email" && a.kind === "failure"),
        "the owner's e-mail is queued",
      );
      await resolve("availability");
      void down;

      // a missed heartbeat goes to Slack, and escalates to PagerDuty while nobody acknowledges
      // (past the noise-control interval of the failure just sent: at most one per 15 min)
      advance(16 * 60_000);
      const incident = String(await open("missed_heartbeat"));
      t.equal(await deliverChannels(ta.ctx), 1, "Slack");
      advance(4 * 60_000);
      t.equal(await runEscalations(ta.ctx), 0, "not yet at 4 min");
      advance(60_000);
      t.equal(await runEscalations(ta.ctx), 1, "escalated at 5 min");
      t.equal(await deliverChannels(ta.ctx), 1, "to PagerDuty");
      t.match(rx.got.at(-1)?.json, { event_action: "trigger", routing_key: ROUTING_KEY });
      advance(10 * 60_000);
      t.equal(await runEscalations(ta.ctx), 1, "a reminder 10 min later");
      await deliverChannels(ta.ctx);
      const ack = await call(ta.app, key, "POST", `/v1/incidents/${incident}/acknowledge`, {});
      t.equal(ack.statusCode, 200);
      advance(10 * 60_000);
      t.equal(await runEscalations(ta.ctx), 0, "acknowledged: no more reminders");
      await deliverChannels(ta.ctx);
      const timeline = await events(incident);
      t.match(
        timeline.filter((e) => e.kind === "escalated").map((e) => e.detail),
        [
          { step: 1, reminder: false, channel_ids: [pagerduty] },
          { step: 2, reminder: true, channel_ids: [pagerduty] },
        ],
        "each step is in the timeline",
      );
      const pdActions = rx.got.filter((g) => g.path.startsWith("/pd/")).map((g) => g.json?.event_action);
      t.same(
        pdActions,
        ["trigger", "trigger", "acknowledge"],
        "PagerDuty: the escalation, the reminder, the acknowledgement",
      );
      advance(60_000);
      const sentBefore = rx.got.length;
      await resolve("missed_heartbeat");
      await deliverChannels(ta.ctx);
      const after = rx.got.slice(sentBefore);
      t.same(
        after.map((g) => (g.path.startsWith("/pd/") ? g.json?.event_action : g.path.split("/")[1])),
        ["resolve"],
        "send_recoveries false: no recovery on Slack, but PagerDuty's incident is resolved",
      );
    },
  );
}

t.test("e-mail and webhook channels go through the e-mail and webhook deliveries", async (t) => {
  const { ta, rx, key, open, alerts } = await world(t, "pglite");
  const mail = await call(ta.app, key, "POST", "/v1/channels", {
    type: "email",
    name: "on-call list",
    settings: { addresses: ["oncall@example.com", "sre@example.com"] },
  });
  t.equal(mail.statusCode, 201, { body: mail.body });
  const hook = await call(ta.app, key, "POST", "/v1/channels", {
    type: "webhook",
    name: "ticketing",
    settings: { url: `${rx.url}/hook/ticketing-secret-path` },
  });
  t.equal(hook.statusCode, 201, { body: hook.body });
  const made = hook.json() as { id: string; signing_secret: string; hint: string };
  t.match(made.signing_secret, /^whsec_/, "the signing secret is shown at creation");
  t.notOk(hook.body.includes("ticketing-secret-path"), "the URL is not answered");
  const listed = await call(ta.app, key, "GET", `/v1/channels/${made.id}`);
  t.notOk(listed.body.includes("whsec_"), "the signing secret is never shown again");

  await open();
  const rows = (await alerts()).filter((a) => a.channel_id !== null);
  t.same(
    rows.map((a) => `${a.channel}:${a.recipient}`).sort(),
    ["email:oncall@example.com", "email:sre@example.com", `webhook:${made.hint}`].sort(),
    "one e-mail per address and one webhook row",
  );
  const { deliverWebhooks } = await import("../../src/webhooks/delivery.js");
  t.equal(await deliverWebhooks(ta.ctx), 1, "the webhook channel is delivered by the webhook job");
  const got = rx.got.find((g) => g.path === "/hook/ticketing-secret-path");
  t.ok(got, "POSTed to the channel's URL");
  const { verifyVigilSignature } = await import("../webhooks/fixtures/receiver.js");
  t.ok(
    verifyVigilSignature(
      String(got?.body),
      String(got?.headers["vigil-signature"]),
      made.signing_secret,
      ta.ctx.now().getTime() / 1000,
    ),
    "signed with the channel's own secret",
  );
  t.match(got?.json, { kind: "failure", connection_name: "alice n8n" });
});

t.test("the owners' e-mail can be turned off; channels still get the alert", async (t) => {
  const { ta, rx, key, make, open, alerts } = await world(t, "pglite");
  await make("ntfy", { topic_url: `${rx.url}/ntfy/owners-off` });
  const off = await call(ta.app, key, "PUT", "/v1/notification-settings", { email_owners: false });
  t.same(off.json(), { email_owners: false });
  t.same((await call(ta.app, key, "GET", "/v1/notification-settings")).json(), { email_owners: false });
  await open();
  const rows = await alerts();
  t.equal(
    rows.filter((a) => a.channel === "email" && a.kind === "failure").length,
    0,
    "no failure e-mail to the owner",
  );
  t.equal(rows.filter((a) => a.channel === "ntfy").length, 1, "ntfy has it");
  t.equal(await deliverChannels(ta.ctx), 1);
});

t.test("two delivery runs at once (two nodes) send each alert once (postgres)", async (t) => {
  if (!(await requireBackend(t, "postgres"))) return;
  const { ta, rx, make, open, resolve, alerts, advance } = await world(t, "postgres");
  await make("slack", { webhook_url: `${rx.url}/slack/T3/B3/secret` });
  await make("pagerduty", { routing_key: ROUTING_KEY, api_url: `${rx.url}/pd` });
  await make("ntfy", { topic_url: `${rx.url}/ntfy/two-nodes` });
  for (let i = 0; i < 10; i++) {
    await open();
    advance(1_000);
    await resolve();
    advance(16 * 60_000);
  }
  const queued = (await alerts()).filter((a) => a.channel_id !== null).length;
  t.equal(queued, 60, "10 failures and 10 recoveries to 3 channels");
  const sent = await Promise.all([
    deliverChannels(ta.ctx, { batch: 7 }),
    deliverChannels(ta.ctx, { batch: 7 }),
    deliverChannels(ta.ctx, { batch: 7 }),
  ]);
  let total = sent.reduce((a, b) => a + b, 0);
  while (total < queued) {
    const more = await deliverChannels(ta.ctx, { batch: 50 });
    if (more === 0) break;
    total += more;
  }
  t.equal(total, queued, "all delivered");
  t.equal(rx.got.length, queued, "and each exactly once");
  t.same(
    rx.got.filter((g) => g.path.startsWith("/pd/")).map((g) => g.json?.event_action),
    Array.from({ length: 10 }, () => ["trigger", "resolve"]).flat(),
    "PagerDuty's trigger and resolve alternate: one channel's alerts keep their order",
  );
});

t.test(
  "under a maintenance window nothing opens and nothing is sent; afterwards alerts flow again",
  async (t) => {
    const { ta, rx, key, w, make, open, alerts, advance, clock } = await world(t, "pglite");
    await make("slack", { webhook_url: `${rx.url}/slack/T4/B4/secret` });
    const res = await call(ta.app, key, "POST", "/v1/maintenance-windows", {
      connection_ids: [w.conns.PA],
      starts_at: new Date(clock.now.getTime() - 60_000).toISOString(),
      ends_at: new Date(clock.now.getTime() + 30 * 60_000).toISOString(),
    });
    t.equal(res.statusCode, 201, { body: res.body });
    t.equal(await open(), null, "no incident opens during the window");
    t.equal(await deliverChannels(ta.ctx), 0);
    t.equal(rx.got.length, 0, "nothing reached Slack");
    t.equal((await alerts()).filter((a) => a.kind === "failure").length, 0, "no failure alert at all");
    advance(31 * 60_000);
    t.ok(await open(), "after the window an incident opens");
    t.equal(await deliverChannels(ta.ctx), 1, "and Slack is told");
  },
);

t.test("an escalation due under a maintenance window waits for its end", async (t) => {
  const { ta, rx, key, w, make, open, events, advance, clock } = await world(t, "pglite");
  const pagerduty = await make("pagerduty", { routing_key: ROUTING_KEY, api_url: `${rx.url}/pd` });
  const slack = await make("slack", { webhook_url: `${rx.url}/slack/T5/B5/secret` });
  const rule = await call(ta.app, key, "POST", "/v1/routing-rules", {
    channel_ids: [slack],
    escalate_after_minutes: 5,
    escalation_channel_ids: [pagerduty],
  });
  t.equal(rule.statusCode, 201, { body: rule.body });
  const incident = String(await open());
  await deliverChannels(ta.ctx);
  // planned work begins after the incident opened, before its escalation is due
  advance(2 * 60_000);
  const win = await call(ta.app, key, "POST", "/v1/maintenance-windows", {
    connection_ids: [w.conns.PA],
    starts_at: clock.now.toISOString(),
    ends_at: new Date(clock.now.getTime() + 10 * 60_000).toISOString(),
  });
  t.equal(win.statusCode, 201, { body: win.body });
  advance(4 * 60_000);
  t.equal(await runEscalations(ta.ctx), 0, "due at 5 min, but the window holds it");
  t.equal(await deliverChannels(ta.ctx), 0, "PagerDuty is not paged");
  advance(7 * 60_000);
  t.equal(await runEscalations(ta.ctx), 1, "after the window, the escalation goes");
  t.equal(await deliverChannels(ta.ctx), 1);
  t.match(rx.got.at(-1)?.json, { event_action: "trigger", routing_key: ROUTING_KEY });
  t.equal(
    (await events(incident)).filter((e) => e.kind === "escalated").length,
    1,
    "one step in the timeline",
  );
});
