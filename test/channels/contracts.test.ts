import { linksOf } from "../../src/channels/alert.js";
import t, { type Test } from "tap";
import { request } from "undici";
import { PROVIDERS, providerOf, type AnyProvider } from "../../src/channels/providers/index.js";
import { encodeHeader, NTFY_DEFAULT_PRIORITY } from "../../src/channels/providers/ntfy.js";
import { cut, cutBytes, retryAfterMs } from "../../src/channels/providers/text.js";
import type {
  ChannelAlert,
  ProviderAnswer,
  ProviderOutcome,
  ProviderRequest,
  ProviderType,
} from "../../src/channels/providers/types.js";
import {
  decodeRfc2047,
  discordContract,
  discordEmbedTotal,
  ntfyContract,
  opsgenieContract,
  pagerdutyContract,
  receiver,
  type Received,
  slackContract,
  teamsContract,
  telegramContract,
} from "./receivers.js";

/**
 * The notification providers' contracts (src/channels/providers): every alert a provider formats
 * is POSTed (undici, as the delivery job does) to a local receiver that checks it against the
 * provider's documented contract (method, path, headers, shape, every length limit) and answers
 * as the provider does; the answer goes through the provider's `interpret`. Normal failures,
 * warnings, recoveries, acknowledgements, resolves, tests and hostile text (10,000 characters,
 * `<script>`, emoji, Markdown, mentions, line breaks, control characters, non-ASCII subjects)
 * must all be accepted within the limits. Then the providers' real error answers, over the wire
 * and canned, must read as retry / give up / refused field, naming no secret; and the settings
 * schemas must refuse bad input naming the field.
 */

// --- the alerts

const INCIDENT = "5d1c7a52-3f0e-4c8b-9a61-0e2b9f4d7c10";
const CONNECTION = "0f4e2a8c-6b1d-4e3f-8a9c-2d7b5e1f3a64";
const LINKS = linksOf("https://vigil.example.com", CONNECTION, INCIDENT);

let n = 0;
function alert(over: Partial<ChannelAlert>): ChannelAlert {
  n++;
  return {
    id: `9a7c1e40-0000-4000-8000-${String(n).padStart(12, "0")}`,
    kind: "failure",
    event: "trigger",
    severity: "critical",
    subject: "alice n8n is down",
    body: "3 probes in a row failed: status 502 from https://n8n.example.com/healthz.\nLast success 12:03 UTC.",
    connectionId: CONNECTION,
    connectionName: "alice n8n",
    incidentId: INCIDENT,
    incidentKind: "availability",
    createdAt: new Date("2026-03-01T12:05:00.000Z"),
    links: LINKS,
    ...over,
  };
}

const HOSTILE_PIECE =
  '<script>alert("x")</script> *bold* _it_ ~strike~ `code` ||spoiler|| > quote # head [link](https://evil.example) ' +
  "<!channel> @everyone <@U123> <@&456> &amp; &lt; & < > \" ' \\ 😀🚨🇩🇪 日本語 Überwachung ✓\r\n\tnext\u0000\u0007line\u2028";
const hostileBody = HOSTILE_PIECE.repeat(Math.ceil(10_000 / HOSTILE_PIECE.length)).slice(0, 10_000);
const emojiBody = "🚨".repeat(5_000); // 10,000 UTF-16 code units, 20,000 UTF-8 bytes

const ALERTS = {
  failure: alert({}),
  escalation: alert({ kind: "escalation", subject: "alice n8n is still down after 30 min" }),
  anomaly: alert({
    kind: "anomaly",
    severity: "warning",
    incidentKind: "anomaly",
    subject: "token cost 4x usual",
  }),
  recovery: alert({
    kind: "recovery",
    event: "resolve",
    severity: "info",
    subject: "alice n8n is back up",
    body: "Down for 14 min.",
  }),
  acknowledged: alert({
    kind: "acknowledged",
    event: "acknowledge",
    severity: "info",
    subject: "alice n8n: bob is on it",
    body: "Acknowledged by bob@example.com.",
  }),
  audit: alert({
    kind: "audit",
    event: "info",
    severity: "info",
    subject: "API key created",
    body: "",
    incidentId: null,
    incidentKind: null,
    links: { incident: null, connection: null, dashboard: LINKS.dashboard },
  }),
  test: alert({
    kind: "test",
    event: "info",
    severity: "info",
    subject: "Vigil test notification",
    body: "If you read this, the channel works.",
    connectionId: null,
    connectionName: null,
    incidentId: null,
    incidentKind: null,
    links: { incident: null, connection: null, dashboard: LINKS.dashboard },
  }),
  hostile: alert({
    subject: "Überwachung ✓ 日本 — 🚨 <b>down</b> & *out* _now_ ~x~ @everyone <!here>\nsecond line\r\n",
    body: hostileBody,
    connectionName: `<script>${"ü".repeat(700)}</script>`,
  }),
  huge: alert({ subject: `${"ü🚨".repeat(800)}`, body: emojiBody, connectionName: "x".repeat(3000) }),
} satisfies Record<string, ChannelAlert>;

// --- the secrets

const ROUTING_KEY = "R0utingKey0123456789abcdefABCDEF";
const API_KEY = "6f1c2d3e-4b5a-4c7d-8e9f-a0b1c2d3e4f5";
const BOT_TOKEN = "7123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw_x";
const NTFY_TOKEN = "tk_AgQdq7mVBoFD37zQVN29RhuMzNIz2";
const SLACK_PATH = "/services/T0A1B2C3D/B0A1B2C3D/hookSecret24charsXYZ0123";
const TEAMS_PATH = "/workflows/4c1d2e3f/triggers/manual/paths/invoke";
const TEAMS_QUERY =
  "?api-version=2016-06-01&sp=%2Ftriggers%2Fmanual%2Frun&sv=1.0&sig=TeamsSigSecretValue0123456789abcdefXYZ";
const DISCORD_PATH =
  "/api/webhooks/1251150000000000000/DiscordTokenSecret_0123456789-abcdefghijklmnopqrstuvwxyz";
const NTFY_PATH = "/vigil_alerts_8f3kq2";

/** Sends a provider's request as the delivery job does (undici), reads the answer back (16 KB). */
async function send(req: ProviderRequest): Promise<ProviderAnswer> {
  const res = await request(req.url, { method: "POST", headers: req.headers, body: req.body });
  const body = await res.body.text();
  return { status: res.statusCode, headers: res.headers, body: body.slice(0, 16 * 1024) };
}

interface World {
  type: ProviderType;
  provider: AnyProvider;
  settings: Record<string, unknown>;
  rx: Awaited<ReturnType<typeof receiver>>;
  /** Every secret string that must never be in an error. */
  secrets: string[];
}

async function world(t: Test, type: ProviderType): Promise<World> {
  const provider = providerOf(type);
  let rx: World["rx"];
  let raw: Record<string, unknown>;
  let secrets: string[];
  switch (type) {
    case "slack":
      rx = await receiver(t, slackContract(SLACK_PATH));
      raw = { webhook_url: rx.url + SLACK_PATH };
      secrets = [rx.url + SLACK_PATH, "hookSecret24charsXYZ0123"];
      break;
    case "teams":
      rx = await receiver(t, teamsContract(TEAMS_PATH + TEAMS_QUERY));
      raw = { webhook_url: rx.url + TEAMS_PATH + TEAMS_QUERY };
      secrets = [rx.url + TEAMS_PATH + TEAMS_QUERY, "TeamsSigSecretValue0123456789abcdefXYZ"];
      break;
    case "discord":
      rx = await receiver(t, discordContract(DISCORD_PATH, { thread_id: "1251150000000000099" }));
      raw = { webhook_url: `${rx.url}${DISCORD_PATH}?thread_id=1251150000000000099` };
      secrets = [String(raw.webhook_url), "DiscordTokenSecret_0123456789-abcdefghijklmnopqrstuvwxyz"];
      break;
    case "pagerduty":
      rx = await receiver(t, pagerdutyContract());
      raw = { routing_key: ROUTING_KEY, api_url: rx.url };
      secrets = [ROUTING_KEY];
      break;
    case "opsgenie":
      rx = await receiver(t, opsgenieContract(API_KEY));
      raw = { api_key: API_KEY, api_url: rx.url };
      secrets = [API_KEY];
      break;
    case "telegram":
      rx = await receiver(t, telegramContract(BOT_TOKEN));
      raw = { bot_token: BOT_TOKEN, chat_id: -1001234567890, api_url: rx.url };
      secrets = [BOT_TOKEN, "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw_x"];
      break;
    case "ntfy":
      rx = await receiver(t, ntfyContract(NTFY_PATH, NTFY_TOKEN));
      raw = { topic_url: rx.url + NTFY_PATH, token: NTFY_TOKEN, priority: 5 };
      secrets = [rx.url + NTFY_PATH, "vigil_alerts_8f3kq2", NTFY_TOKEN];
      break;
  }
  const settings = provider.settings.parse(raw) as Record<string, unknown>;
  return { type, provider, settings, rx, secrets };
}

/** Formats, sends and reads one alert; the receiver's record of it. */
async function deliver(w: World, a: ChannelAlert): Promise<{ got: Received; outcome: ProviderOutcome }> {
  const req = w.provider.request(a, w.settings);
  const answer = await send(req);
  const got = w.rx.last();
  if (!got) throw new Error("the receiver got nothing");
  return { got, outcome: w.provider.interpret(answer, w.settings) };
}

const TYPES = Object.keys(PROVIDERS) as ProviderType[];

t.test("every provider type has a module, and providerOf finds it", async (t) => {
  t.same(TYPES.sort(), ["discord", "ntfy", "opsgenie", "pagerduty", "slack", "teams", "telegram"]);
  for (const type of TYPES) {
    t.equal(providerOf(type).type, type);
    const p = providerOf(type);
    for (const f of [...p.secretFields, ...p.urlFields]) t.type(f, "string");
  }
  t.throws(() => providerOf("email" as ProviderType));
});

for (const type of TYPES) {
  t.test(`${type}: every kind of alert is accepted within the contract`, async (t) => {
    const w = await world(t, type);
    for (const [name, a] of Object.entries(ALERTS)) {
      const { got, outcome } = await deliver(w, a);
      t.same(got.problems, [], `${name}: the ${type} contract holds`);
      t.same(outcome, { error: null }, `${name}: accepted`);
    }
    t.equal(w.rx.received.length, Object.keys(ALERTS).length);
  });
}

// --- what each provider shows

t.test(
  "slack: header, escaped mrkdwn, fields, link buttons; recoveries and tests read as such",
  async (t) => {
    const w = await world(t, "slack");
    const blocksOf = async (a: ChannelAlert) => {
      const { got } = await deliver(w, a);
      return got.seen as {
        text: string;
        blocks: {
          type: string;
          text?: { text: string };
          fields?: { text: string }[];
          elements?: { url: string; text: { text: string } }[];
        }[];
      };
    };
    const failure = await blocksOf(ALERTS.failure);
    t.same(
      failure.blocks.map((b) => b.type),
      ["header", "section", "section", "actions"],
    );
    t.equal(failure.blocks[0]?.text?.text, "🔴 Critical: alice n8n is down");
    t.match(failure.text, /Critical: alice n8n is down/);
    t.same(
      failure.blocks[2]?.fields?.map((f) => f.text),
      ["*Connection*\nalice n8n", "*Kind*\nfailure (availability)", `*Incident*\n${INCIDENT}`],
    );
    t.same(
      failure.blocks[3]?.elements?.map((e) => [e.text.text, e.url]),
      [
        ["Open incident", LINKS.incident],
        ["Open connection", LINKS.connection],
        ["Open dashboard", LINKS.dashboard],
      ],
    );
    t.match((await blocksOf(ALERTS.recovery)).blocks[0]?.text?.text, /^✅ Resolved: alice n8n is back up$/);
    t.match((await blocksOf(ALERTS.acknowledged)).blocks[0]?.text?.text, /^👀 Acknowledged: /);
    const test = await blocksOf(ALERTS.test);
    t.match(test.blocks[0]?.text?.text, /^🧪 Test: /);
    t.match(test.blocks[1]?.text?.text, /test notification from Vigil/);
    t.same(
      test.blocks[3]?.elements?.map((e) => e.text.text),
      ["Open dashboard"],
      "only the links that exist",
    );
    const hostile = await blocksOf(ALERTS.hostile);
    const section = hostile.blocks[1]?.text?.text ?? "";
    t.match(section, /&lt;script&gt;alert\("x"\)&lt;\/script&gt;/, "HTML is text");
    t.match(section, /&lt;!channel&gt;/, "no mention from the alert's text");
    t.ok(section.length <= 3000 && section.endsWith("…"), "cut at 3000 with an ellipsis");
    t.notMatch(hostile.blocks[0]?.text?.text ?? "", /\n/, "the header is one line");
  },
);

t.test("teams: an Adaptive Card 1.4 with title, body, facts and links, under 28 KB", async (t) => {
  const w = await world(t, "teams");
  type Card = {
    body: { type: string; text?: string; color?: string; facts?: { title: string; value: string }[] }[];
    actions: { title: string; url: string }[];
  };
  const cardOf = async (a: ChannelAlert) => ((await deliver(w, a)).got.seen.card ?? {}) as Card;
  const failure = await cardOf(ALERTS.failure);
  t.same(
    failure.body.map((b) => b.type),
    ["TextBlock", "TextBlock", "FactSet"],
  );
  t.equal(failure.body[0]?.text, "Critical: alice n8n is down");
  t.equal(failure.body[0]?.color, "Attention");
  t.same(
    failure.body[2]?.facts?.map((f) => f.title),
    ["Connection", "Kind", "Incident"],
  );
  t.same(
    failure.actions.map((a) => a.title),
    ["Open incident", "Open connection", "Open dashboard"],
  );
  const recovery = await cardOf(ALERTS.recovery);
  t.equal(recovery.body[0]?.text, "Resolved: alice n8n is back up");
  t.equal(recovery.body[0]?.color, "Good");
  t.match((await cardOf(ALERTS.test)).body[0]?.text, /^Test: /);
  const { got } = await deliver(w, { ...ALERTS.huge, body: "🚨\n".repeat(20_000) });
  t.ok(got.raw.length <= 26_000, `an 80 KB body is cut to ${got.raw.length} bytes`);
  t.match((got.seen.card as Card).body[1]?.text, /…$/);
});

t.test("discord: one embed within every limit, ?wait=true, no mentions, escaped Markdown", async (t) => {
  const w = await world(t, "discord");
  type Embed = {
    title: string;
    description?: string;
    color: number;
    url: string;
    timestamp: string;
    fields: { name: string; value: string }[];
    footer: { text: string };
  };
  const embedOf = async (a: ChannelAlert) => {
    const { got } = await deliver(w, a);
    return { got, embed: ((got.seen.embeds ?? []) as Embed[])[0] as Embed };
  };
  const { got, embed } = await embedOf(ALERTS.failure);
  t.match(got.path, /\?thread_id=1251150000000000099&wait=true$/, "the query is kept, wait=true added");
  t.equal(embed.title, "🔴 Critical: alice n8n is down");
  t.equal(embed.color, 0xe01e5a);
  t.equal(embed.url, LINKS.incident);
  t.equal(embed.timestamp, "2026-03-01T12:05:00.000Z");
  t.same(
    embed.fields.map((f) => f.name),
    ["Connection", "Kind", "Incident", "Links"],
  );
  t.equal((await embedOf(ALERTS.recovery)).embed.color, 0x2eb67d, "a recovery is green");
  t.match((await embedOf(ALERTS.recovery)).embed.title, /Resolved/);
  t.match((await embedOf(ALERTS.test)).embed.title, /Test: /);
  const hostile = await embedOf(ALERTS.hostile);
  t.ok(discordEmbedTotal(hostile.embed as unknown as Record<string, unknown>) <= 6000);
  t.match(hostile.embed.description, /\\<script\\>/, "Markdown and <…> escaped");
  t.match(hostile.embed.description, /\\\*bold\\\*/);
  t.same(hostile.got.seen.allowed_mentions, { parse: [] });
});

t.test(
  "pagerduty: trigger, acknowledge and resolve meet on one dedup key; payload only on trigger",
  async (t) => {
    const w = await world(t, "pagerduty");
    const eventOf = async (a: ChannelAlert) =>
      (await deliver(w, a)).got.seen as Record<string, unknown> & { payload?: Record<string, unknown> };
    const key = `vigil-incident-${INCIDENT}`;
    const trigger = await eventOf(ALERTS.failure);
    t.match(trigger, {
      routing_key: ROUTING_KEY,
      event_action: "trigger",
      dedup_key: key,
      client: "Vigil",
      client_url: LINKS.dashboard,
      payload: {
        summary: "Critical: alice n8n is down",
        source: "alice n8n",
        severity: "critical",
        timestamp: "2026-03-01T12:05:00.000Z",
        component: "availability",
        group: CONNECTION,
        class: "failure",
        custom_details: { incident_id: INCIDENT, kind: "failure" },
      },
    });
    t.same(
      (trigger.links as { href: string }[]).map((l) => l.href),
      [LINKS.incident, LINKS.connection, LINKS.dashboard],
    );
    t.same(await eventOf(ALERTS.acknowledged), {
      routing_key: ROUTING_KEY,
      event_action: "acknowledge",
      dedup_key: key,
    });
    t.same(await eventOf(ALERTS.recovery), {
      routing_key: ROUTING_KEY,
      event_action: "resolve",
      dedup_key: key,
    });
    t.match(await eventOf(ALERTS.anomaly), { event_action: "trigger", payload: { severity: "warning" } });
    const info = await eventOf(ALERTS.audit);
    t.match(info, {
      event_action: "trigger",
      dedup_key: `vigil-${ALERTS.audit.id}`,
      payload: { severity: "info" },
    });
    t.match(await eventOf(ALERTS.test), {
      event_action: "trigger",
      payload: { severity: "info", summary: /^Test: / },
    });
    const hostile = await eventOf(ALERTS.hostile);
    t.ok(String(hostile.payload?.summary).length <= 1024);
    t.notMatch(String(hostile.payload?.summary), /\n/, "the summary is one line");
  },
);

t.test("opsgenie: create with an alias, acknowledge and close by alias", async (t) => {
  const w = await world(t, "opsgenie");
  const seenOf = async (a: ChannelAlert) => (await deliver(w, a)).got;
  const alias = `vigil-incident-${INCIDENT}`;
  const create = await seenOf(ALERTS.failure);
  t.equal(create.path, "/v2/alerts");
  t.match(create.seen, {
    action: "create",
    message: "Critical: alice n8n is down",
    alias,
    source: "Vigil",
    priority: "P1",
    entity: "alice n8n",
    tags: ["vigil", "failure", "availability"],
    details: { incident_id: INCIDENT, incident_url: LINKS.incident },
  });
  const ack = await seenOf(ALERTS.acknowledged);
  t.equal(ack.path, `/v2/alerts/${alias}/acknowledge?identifierType=alias`);
  t.match(ack.seen, { action: "acknowledge", alias, source: "Vigil", note: /Acknowledged by bob/ });
  const close = await seenOf(ALERTS.recovery);
  t.equal(close.path, `/v2/alerts/${alias}/close?identifierType=alias`);
  t.match(close.seen, { action: "close", note: /^Resolved: / });
  t.match((await seenOf(ALERTS.anomaly)).seen, { priority: "P3" });
  t.match((await seenOf(ALERTS.test)).seen, {
    priority: "P5",
    message: /^Test: /,
    alias: `vigil-${ALERTS.test.id}`,
  });
  const hostile = await seenOf(ALERTS.hostile);
  t.ok(String(hostile.seen.message).length <= 130);
});

t.test("telegram: HTML with every < > & of the alert escaped, within 4096 visible characters", async (t) => {
  const w = await world(t, "telegram");
  const { got } = await deliver(w, ALERTS.failure);
  t.equal(got.path, `/bot${BOT_TOKEN}/sendMessage`);
  t.equal(got.seen.chat_id, -1001234567890, "a numeric chat id is sent as a number");
  t.match(got.seen.text, /^<b>🔴 Critical: alice n8n is down<\/b>\n\n3 probes/);
  t.match(
    got.seen.text,
    new RegExp(`<a href="${String(LINKS.incident).replace(/[?]/g, "\\?")}">Open incident</a>`),
  );
  t.match((await deliver(w, ALERTS.recovery)).got.seen.visible, /^✅ Resolved: alice n8n is back up/);
  t.match((await deliver(w, ALERTS.test)).got.seen.visible, /^🧪 Test: /);
  const hostile = (await deliver(w, ALERTS.hostile)).got;
  t.match(hostile.seen.text, /&lt;script&gt;alert\(&quot;x&quot;\)&lt;\/script&gt;/);
  t.ok(String(hostile.seen.visible).length <= 4096);
  t.match(hostile.seen.visible, /<script>alert\("x"\)<\/script>/, "shown as typed");

  const byName = provider("telegram", { bot_token: BOT_TOKEN, chat_id: "@vigil_alerts", api_url: w.rx.url });
  const named = byName.provider.request(ALERTS.failure, byName.settings);
  t.equal(JSON.parse(named.body).chat_id, "@vigil_alerts");
});

t.test(
  "ntfy: title encoded for non-ASCII, priority by tone, tags, click, bearer token, 4096 bytes",
  async (t) => {
    const w = await world(t, "ntfy");
    const seenOf = async (a: ChannelAlert) => (await deliver(w, a)).got;
    const failure = await seenOf(ALERTS.failure);
    t.equal(failure.headers.title, "Critical: alice n8n is down", "an ASCII title is sent as is");
    t.match(
      failure.seen,
      { priority: 5, tags: ["rotating_light", "vigil", "failure"] },
      "the configured priority",
    );
    t.equal(failure.headers.click, LINKS.incident);
    t.match(failure.body, /^3 probes in a row failed/);
    t.match(failure.body, /Connection: alice n8n\nKind: failure \(availability\)/);
    const recovery = await seenOf(ALERTS.recovery);
    t.match(recovery.seen, {
      title: "Resolved: alice n8n is back up",
      priority: 3,
      tags: ["white_check_mark", "vigil", "recovery"],
    });
    t.match((await seenOf(ALERTS.acknowledged)).seen, { priority: 3, tags: ["eyes"] });
    t.match((await seenOf(ALERTS.anomaly)).seen, { priority: 3, tags: ["warning"] });
    t.match((await seenOf(ALERTS.test)).seen, { title: /^Test: /, tags: ["test_tube"] });
    const hostile = await seenOf(ALERTS.hostile);
    t.match(hostile.headers.title, /^=\?UTF-8\?B\?/, "a non-ASCII title is RFC 2047 encoded");
    t.equal(
      hostile.seen.title,
      "Critical: Überwachung ✓ 日本 — 🚨 <b>down</b> & *out* _now_ ~x~ @everyone <!here> second line",
      "and decodes to the headline",
    );
    t.ok(hostile.raw.length <= 4096, `the message is ${hostile.raw.length} bytes`);
    const huge = await seenOf(ALERTS.huge);
    t.ok(huge.raw.length <= 4096 && huge.body.includes("…"));

    const quiet = provider("ntfy", { topic_url: "https://ntfy.sh/alerts_x" });
    const req = quiet.provider.request(ALERTS.failure, quiet.settings);
    t.equal(req.headers.priority, String(NTFY_DEFAULT_PRIORITY), "default priority");
    t.notOk("authorization" in req.headers, "no token, no Authorization");
  },
);

// --- answers

function provider(type: ProviderType, raw: Record<string, unknown>) {
  const p = providerOf(type);
  return { provider: p, settings: p.settings.parse(raw) as Record<string, unknown> };
}

const SETTINGS: Record<ProviderType, Record<string, unknown>> = {
  slack: { webhook_url: `https://hooks.slack.com${SLACK_PATH}` },
  teams: { webhook_url: `https://prod-01.westus.logic.azure.com${TEAMS_PATH}${TEAMS_QUERY}` },
  discord: { webhook_url: `https://discord.com${DISCORD_PATH}` },
  pagerduty: { routing_key: ROUTING_KEY },
  opsgenie: { api_key: API_KEY },
  telegram: { bot_token: BOT_TOKEN, chat_id: "-1001234567890" },
  ntfy: { topic_url: `https://ntfy.sh${NTFY_PATH}`, token: NTFY_TOKEN },
};
const ALL_SECRETS = [
  ROUTING_KEY,
  API_KEY,
  BOT_TOKEN,
  BOT_TOKEN.split(":")[1] ?? "",
  NTFY_TOKEN,
  "vigil_alerts_8f3kq2",
  "hookSecret24charsXYZ0123",
  "TeamsSigSecretValue0123456789abcdefXYZ",
  "DiscordTokenSecret_0123456789-abcdefghijklmnopqrstuvwxyz",
];
const CREDENTIAL: Record<ProviderType, string> = {
  slack: "webhook_url",
  teams: "webhook_url",
  discord: "webhook_url",
  pagerduty: "routing_key",
  opsgenie: "api_key",
  telegram: "bot_token",
  ntfy: "token",
};

const answer = (
  status: number,
  body: unknown = "",
  headers: Record<string, string> = {},
): ProviderAnswer => ({
  status,
  headers,
  body: typeof body === "string" ? body : JSON.stringify(body),
});
/** An error body that echoes every secret, as a careless provider might. */
const ECHO = `denied for ${[...ALL_SECRETS, ...Object.values(SETTINGS).flatMap((v) => Object.values(v))].join(" and ")}`;

/** Each provider's own secrets in SETTINGS: a provider can keep out of its errors only what it knows. */
const SECRETS: Record<ProviderType, string[]> = {
  slack: [String(SETTINGS.slack.webhook_url), "hookSecret24charsXYZ0123", SLACK_PATH],
  teams: [String(SETTINGS.teams.webhook_url), "TeamsSigSecretValue0123456789abcdefXYZ"],
  discord: [String(SETTINGS.discord.webhook_url), "DiscordTokenSecret_0123456789-abcdefghijklmnopqrstuvwxyz"],
  pagerduty: [ROUTING_KEY],
  opsgenie: [API_KEY],
  telegram: [BOT_TOKEN, BOT_TOKEN.split(":")[1] ?? ""],
  ntfy: [String(SETTINGS.ntfy.topic_url), "vigil_alerts_8f3kq2", NTFY_TOKEN],
};

const outcomes: { type: ProviderType; what: string; outcome: ProviderOutcome }[] = [];
function read(type: ProviderType, a: ProviderAnswer, what: string): ProviderOutcome {
  const { provider: p, settings } = provider(type, SETTINGS[type]);
  const outcome = p.interpret(a, settings);
  outcomes.push({ type, what: `${type} ${what}`, outcome });
  return outcome;
}

t.test(
  "common answers: 2xx accepted, 401/403 refuse the credential, 408/429/5xx retried, other 4xx given up",
  async (t) => {
    for (const type of TYPES) {
      t.same(read(type, answer(200, "ok"), "200"), { error: null }, `${type} 200`);
      t.same(read(type, answer(202, ""), "202"), { error: null }, `${type} 202`);
      t.same(read(type, answer(204, ""), "204"), { error: null }, `${type} 204`);
      const unauthorized = read(type, answer(401, ECHO), "401");
      t.match(
        unauthorized,
        { giveUp: true, refusedField: CREDENTIAL[type], error: /^HTTP 401/ },
        `${type} 401`,
      );
      t.ok(unauthorized.error && unauthorized.error.length <= 220, "a short error");
      t.match(read(type, answer(429, "", { "retry-after": "7" }), "429"), {
        retryAfterMs: 7000,
        error: "HTTP 429",
      });
      t.notOk(read(type, answer(429, ""), "429 bare").giveUp, `${type} 429 without Retry-After: retried`);
      t.equal(read(type, answer(429, ""), "429 bare").retryAfterMs, undefined, "the back-off decides");
      t.match(read(type, answer(500, "Internal Server Error"), "500"), {
        error: "HTTP 500: Internal Server Error",
      });
      t.notOk(read(type, answer(503, ""), "503").giveUp);
      t.notOk(read(type, answer(408, ""), "408").giveUp);
      t.match(read(type, answer(302, ""), "302"), { giveUp: true, error: /redirects are not followed/ });
      t.match(read(type, answer(413, "Request Entity Too Large"), "413"), {
        giveUp: true,
        error: /^HTTP 413: Request Entity Too Large/,
      });
      t.equal(read(type, answer(413, ""), "413").refusedField, undefined);
    }
    t.match(
      read(
        "slack",
        answer(503, "", {
          "retry-after": "Sun, 01 Mar 2026 12:00:30 GMT",
          date: "Sun, 01 Mar 2026 12:00:00 GMT",
        }),
        "date",
      ),
      {
        retryAfterMs: 30_000,
      },
    );
  },
);

t.test("provider error answers as the providers give them", async (t) => {
  // PagerDuty
  const badKey = read(
    "pagerduty",
    answer(400, {
      status: "invalid event",
      message: "Event object is invalid",
      errors: ["Length of 'routing_key' is incorrect (should be 32 characters)"],
    }),
    "400 key length",
  );
  t.same(badKey, {
    error:
      "HTTP 400: Event object is invalid: Length of 'routing_key' is incorrect (should be 32 characters)",
    giveUp: true,
    refusedField: "routing_key",
  });
  t.match(read("pagerduty", answer(400, "Invalid routing key"), "400 invalid key"), {
    giveUp: true,
    refusedField: "routing_key",
  });
  t.match(read("pagerduty", answer(404, { status: "Not Found", message: "Not Found" }), "404"), {
    giveUp: true,
    refusedField: "routing_key",
  });
  const badEvent = read(
    "pagerduty",
    answer(400, {
      status: "invalid event",
      message: "Event object is invalid",
      errors: ["'payload.summary' is missing or blank"],
    }),
    "400 event",
  );
  t.match(badEvent, { giveUp: true, error: /payload\.summary/ });
  t.equal(badEvent.refusedField, undefined, "a bad event is not the key's fault");
  t.match(read("pagerduty", answer(429, { status: "throttle exceeded" }, { "Retry-After": "7" }), "429"), {
    retryAfterMs: 7000,
  });

  // Opsgenie
  t.match(
    read(
      "opsgenie",
      answer(401, { message: "Key format is not valid!", took: 0.001, requestId: "x" }),
      "401",
    ),
    {
      giveUp: true,
      refusedField: "api_key",
      error: "HTTP 401: Key format is not valid!",
    },
  );
  t.match(
    read("opsgenie", answer(403, { message: "You are not authorized for this operation", took: 0 }), "403"),
    { refusedField: "api_key" },
  );
  const unprocessable = read(
    "opsgenie",
    answer(422, {
      message: "Request body is not processable. Please check the errors.",
      errors: { message: "Message can not be empty." },
      took: 0.1,
    }),
    "422",
  );
  t.match(unprocessable, { giveUp: true, error: /not processable.*Message can not be empty/ });
  t.equal(unprocessable.refusedField, undefined);
  t.match(read("opsgenie", answer(404, { message: "Alert with alias [vigil-x] does not exist" }), "404"), {
    giveUp: true,
  });

  // Telegram
  t.match(read("telegram", answer(401, { ok: false, error_code: 401, description: "Unauthorized" }), "401"), {
    giveUp: true,
    refusedField: "bot_token",
    error: "HTTP 401: Unauthorized",
  });
  t.match(read("telegram", answer(404, { ok: false, error_code: 404, description: "Not Found" }), "404"), {
    refusedField: "bot_token",
  });
  t.match(
    read(
      "telegram",
      answer(400, { ok: false, error_code: 400, description: "Bad Request: chat not found" }),
      "400 chat",
    ),
    {
      giveUp: true,
      refusedField: "chat_id",
      error: "HTTP 400: Bad Request: chat not found",
    },
  );
  t.match(
    read(
      "telegram",
      answer(403, {
        ok: false,
        error_code: 403,
        description: "Forbidden: bot is not a member of the channel chat",
      }),
      "403",
    ),
    { refusedField: "chat_id" },
  );
  t.match(
    read(
      "telegram",
      answer(400, {
        ok: false,
        error_code: 400,
        description: "Bad Request: group chat was upgraded to a supergroup chat",
        parameters: { migrate_to_chat_id: -1009876543210 },
      }),
      "400 migrated",
    ),
    { refusedField: "chat_id", error: /-1009876543210/ },
  );
  const parseError = read(
    "telegram",
    answer(400, { ok: false, error_code: 400, description: "Bad Request: can't parse entities" }),
    "400 parse",
  );
  t.equal(parseError.refusedField, undefined);
  t.match(
    read(
      "telegram",
      answer(429, {
        ok: false,
        error_code: 429,
        description: "Too Many Requests: retry after 12",
        parameters: { retry_after: 12 },
      }),
      "429",
    ),
    { retryAfterMs: 12_000, error: "HTTP 429: Too Many Requests: retry after 12" },
  );
  t.match(read("telegram", answer(200, { ok: false, description: "Bad Request: odd" }), "200 not ok"), {
    giveUp: true,
    error: /odd/,
  });

  // Slack
  t.match(read("slack", answer(404, "no_service"), "404"), {
    giveUp: true,
    refusedField: "webhook_url",
    error: "HTTP 404: no_service",
  });
  t.match(read("slack", answer(410, "channel_is_archived"), "410"), { refusedField: "webhook_url" });
  t.match(read("slack", answer(403, "action_prohibited"), "403"), { refusedField: "webhook_url" });
  const invalid = read("slack", answer(400, "invalid_payload"), "400");
  t.match(invalid, { giveUp: true, error: "HTTP 400: invalid_payload" });
  t.equal(invalid.refusedField, undefined);
  t.match(read("slack", answer(500, "rollup_error"), "500"), { error: "HTTP 500: rollup_error" });

  // Discord
  t.match(read("discord", answer(404, { message: "Unknown Webhook", code: 10015 }), "404"), {
    refusedField: "webhook_url",
    error: "HTTP 404: Unknown Webhook",
  });
  t.match(read("discord", answer(401, { message: "Invalid Webhook Token", code: 50027 }), "401"), {
    refusedField: "webhook_url",
  });
  t.match(
    read(
      "discord",
      answer(400, {
        message: "Invalid Form Body",
        code: 50035,
        errors: {
          embeds: {
            "0": {
              description: {
                _errors: [{ code: "BASE_TYPE_MAX_LENGTH", message: "Must be 4096 or fewer in length." }],
              },
            },
          },
        },
      }),
      "400",
    ),
    { giveUp: true, error: "HTTP 400: Invalid Form Body: Must be 4096 or fewer in length." },
  );
  t.match(
    read(
      "discord",
      answer(
        429,
        { message: "You are being rate limited.", retry_after: 1.5, global: false },
        { "retry-after": "2" },
      ),
      "429",
    ),
    {
      retryAfterMs: 1500,
    },
  );

  // Teams
  t.match(
    read(
      "teams",
      answer(400, {
        error: {
          code: "InvalidRequestContent",
          message: "The input body for trigger 'manual' of type 'Request' must be of type JSON",
        },
      }),
      "400",
    ),
    {
      giveUp: true,
      error: /input body for trigger/,
    },
  );
  t.match(
    read(
      "teams",
      answer(404, { error: { code: "WorkflowNotFound", message: "The workflow was not found." } }),
      "404",
    ),
    { refusedField: "webhook_url" },
  );

  // ntfy
  t.match(
    read(
      "ntfy",
      answer(403, {
        code: 40301,
        http: 403,
        error: "forbidden",
        link: "https://ntfy.sh/docs/publish/#authentication",
      }),
      "403",
    ),
    {
      refusedField: "token",
      error: "HTTP 403: forbidden",
    },
  );
  t.match(
    read("ntfy", answer(429, { code: 42901, http: 429, error: "limit reached: too many requests" }), "429"),
    { error: /too many requests/ },
  );
});

t.test(
  "error answers over the wire: 401, 400 routing key, 429 Retry-After: 7, Telegram's retry_after, 500",
  async (t) => {
    const cases: [
      ProviderType,
      { status: number; headers?: Record<string, string>; body?: string },
      Partial<ProviderOutcome>,
    ][] = [
      ["slack", { status: 401, body: "invalid_token" }, { giveUp: true, refusedField: "webhook_url" }],
      [
        "pagerduty",
        {
          status: 400,
          headers: { "content-type": "application/json" },
          body: JSON.stringify({
            status: "invalid event",
            message: "Event object is invalid",
            errors: ["Invalid routing key"],
          }),
        },
        { giveUp: true, refusedField: "routing_key" },
      ],
      ["opsgenie", { status: 429, headers: { "retry-after": "7" }, body: "" }, { retryAfterMs: 7000 }],
      [
        "telegram",
        {
          status: 429,
          headers: { "content-type": "application/json" },
          body: JSON.stringify({
            ok: false,
            error_code: 429,
            description: "Too Many Requests: retry after 9",
            parameters: { retry_after: 9 },
          }),
        },
        { retryAfterMs: 9000 },
      ],
      ["discord", { status: 500, body: "" }, { error: "HTTP 500" }],
      [
        "teams",
        { status: 502, body: "<html><body><h1>502 Bad Gateway</h1></body></html>" },
        { error: "HTTP 502: 502 Bad Gateway" },
      ],
      [
        "ntfy",
        {
          status: 401,
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ code: 40101, http: 401, error: "unauthorized" }),
        },
        { refusedField: "token" },
      ],
    ];
    for (const [type, reply, expected] of cases) {
      const w = await world(t, type);
      w.rx.control.replies.push(reply);
      const { got, outcome } = await deliver(w, ALERTS.hostile);
      t.same(got.problems, [], `${type}: the request itself was within the contract`);
      t.match(outcome, expected, `${type} ${reply.status}`);
      t.notOk(outcome.error === null, "an error");
      if (reply.status === 429 || reply.status >= 500) t.notOk(outcome.giveUp, "retried");
      for (const s of w.secrets) t.notOk(outcome.error?.includes(s), `${type}: the error names no secret`);
      outcomes.push({ type, what: `${type} wire ${reply.status}`, outcome });
    }
  },
);

t.test("no error names a secret, even when the provider's answer echoes it", async (t) => {
  for (const type of TYPES)
    for (const status of [400, 401, 403, 404, 429, 500]) read(type, answer(status, ECHO), `echo ${status}`);
  for (const type of TYPES)
    read(type, answer(400, { ok: false, description: ECHO, message: ECHO }), "echo json");
  t.ok(outcomes.length > 100);
  for (const { type, what, outcome } of outcomes)
    for (const s of SECRETS[type])
      t.notOk(outcome.error?.includes(s), `${what}: no secret in ${JSON.stringify(outcome.error)}`);
});

// --- settings

function issues(type: ProviderType, raw: unknown) {
  const r = providerOf(type).settings.safeParse(raw);
  return r.success ? [] : r.error.issues.map((i) => ({ path: i.path.join("."), message: i.message }));
}

t.test("settings schemas refuse bad input with a message naming the field", async (t) => {
  t.match(issues("pagerduty", { routing_key: "abc123" }), [
    { path: "routing_key", message: /routing_key must be the 32-character integration key/ },
  ]);
  t.match(issues("pagerduty", { routing_key: `${ROUTING_KEY.slice(0, 31)}-` }), [{ path: "routing_key" }]);
  t.match(issues("pagerduty", { routing_key: ROUTING_KEY, api_url: "https://events.pagerduty.com/?x=1" }), [
    { path: "api_url", message: /api_url must be/ },
  ]);
  t.match(issues("slack", { webhook_url: "not a url" }), [
    { path: "webhook_url", message: /webhook_url must be the Slack incoming webhook URL/ },
  ]);
  t.match(issues("slack", { webhook_url: "ftp://hooks.slack.com/x" }), [{ path: "webhook_url" }]);
  t.match(issues("slack", { webhook_url: "https://user:pw@hooks.slack.com/x" }), [{ path: "webhook_url" }]);
  t.match(issues("slack", { webhook_url: "https://hooks.slack.com/services/a\nb" }), [
    { path: "webhook_url" },
  ]);
  t.match(issues("slack", {}), [{ path: "webhook_url", message: /webhook_url must be/ }]);
  t.match(issues("discord", { webhook_url: 42 }), [{ path: "webhook_url", message: /webhook_url/ }]);
  t.match(issues("teams", { webhook_url: "/relative/path" }), [{ path: "webhook_url" }]);
  t.match(issues("ntfy", { topic_url: "https://ntfy.sh/alerts", priority: 6 }), [
    { path: "priority", message: /priority must be from 1 \(min\) to 5 \(max\)/ },
  ]);
  t.match(issues("ntfy", { topic_url: "https://ntfy.sh/alerts", priority: 2.5 }), [
    { path: "priority", message: /priority/ },
  ]);
  t.match(issues("ntfy", { topic_url: "https://ntfy.sh/alerts", priority: "4" }), [
    { path: "priority", message: /priority/ },
  ]);
  t.match(issues("ntfy", { topic_url: "https://ntfy.sh/" }), [
    { path: "topic_url", message: /topic_url must be the topic's URL/ },
  ]);
  t.match(issues("ntfy", { topic_url: "https://ntfy.sh/a", token: "has space" }), [
    { path: "token", message: /token/ },
  ]);
  t.match(issues("slack", { webhook_url: "https://hooks.slack.com/services/x", channel: "#general" }), [
    { message: /unknown field channel/ },
  ]);
  t.match(issues("pagerduty", { routing_key: ROUTING_KEY, severity: "critical", service_key: "x" }), [
    { message: /unknown fields severity, service_key: the settings take routing_key, api_url/ },
  ]);
  t.match(issues("opsgenie", { api_key: "not-a-genie-key" }), [
    { path: "api_key", message: /api_key must be the API key of an Opsgenie API integration/ },
  ]);
  t.match(issues("opsgenie", { api_key: API_KEY, api_url: "https://api.opsgenie.com#frag" }), [
    { path: "api_url" },
  ]);
  t.match(issues("telegram", { bot_token: "123:short", chat_id: 1 }), [
    { path: "bot_token", message: /bot_token must be the bot's token/ },
  ]);
  t.match(issues("telegram", { bot_token: BOT_TOKEN, chat_id: "general" }), [
    { path: "chat_id", message: /chat_id must be/ },
  ]);
  t.match(issues("telegram", { bot_token: BOT_TOKEN, chat_id: 1.5 }), [
    { path: "chat_id", message: /chat_id/ },
  ]);
  t.match(issues("telegram", { bot_token: BOT_TOKEN }), [{ path: "chat_id", message: /chat_id/ }]);
  t.match(issues("telegram", null), [
    { message: /settings must be a JSON object with bot_token, chat_id, api_url/ },
  ]);

  // and take good input
  t.same(
    issues("slack", { webhook_url: "http://127.0.0.1:8080/services/x" }),
    [],
    "plain http passes the schema (the outbound rules decide)",
  );
  t.same(
    issues("pagerduty", { routing_key: ROUTING_KEY, api_url: "https://relay.example.com/pagerduty/" }),
    [],
    "a path prefix",
  );
  t.same(issues("opsgenie", { api_key: API_KEY.toUpperCase(), api_url: "https://api.eu.opsgenie.com" }), []);
  for (const chat_id of [123456789, -1001234567890, "-1001234567890", "42", "@vigil_alerts"])
    t.same(issues("telegram", { bot_token: BOT_TOKEN, chat_id }), [], `chat_id ${chat_id}`);
  t.same(
    issues("ntfy", { topic_url: "https://ntfy.example.com/team/alerts-1", token: NTFY_TOKEN, priority: 1 }),
    [],
  );
  for (const type of TYPES) t.same(issues(type, SETTINGS[type]), [], `${type} settings`);
});

t.test("secret and URL fields, hints", async (t) => {
  const fields = Object.fromEntries(
    TYPES.map((type) => [type, [providerOf(type).secretFields, providerOf(type).urlFields]]),
  );
  t.same(fields, {
    slack: [["webhook_url"], ["webhook_url"]],
    teams: [["webhook_url"], ["webhook_url"]],
    discord: [["webhook_url"], ["webhook_url"]],
    pagerduty: [["routing_key"], ["api_url"]],
    opsgenie: [["api_key"], ["api_url"]],
    telegram: [["bot_token"], ["api_url"]],
    ntfy: [["topic_url", "token"], ["topic_url"]],
  });
  const hint = (type: ProviderType, raw: Record<string, unknown>) => {
    const { provider: p, settings } = provider(type, raw);
    return p.hint(settings);
  };
  t.equal(hint("slack", SETTINGS.slack), "hooks.slack.com/…0123");
  t.equal(hint("discord", SETTINGS.discord), "discord.com/…wxyz");
  t.equal(hint("teams", SETTINGS.teams), "prod-01.westus.logic.azure.com/…fXYZ");
  t.equal(hint("pagerduty", SETTINGS.pagerduty), "routing key …CDEF");
  t.equal(hint("opsgenie", SETTINGS.opsgenie), "api key …e4f5 (api.opsgenie.com)");
  t.equal(
    hint("opsgenie", { api_key: API_KEY, api_url: "https://api.eu.opsgenie.com" }),
    "api key …e4f5 (api.eu.opsgenie.com)",
  );
  t.equal(hint("telegram", SETTINGS.telegram), "chat -1001234567890");
  t.equal(hint("ntfy", SETTINGS.ntfy), "ntfy.sh/…q2");
  for (const type of TYPES)
    for (const s of ALL_SECRETS)
      t.notOk(hint(type, SETTINGS[type]).includes(s), `${type} hint names no secret`);
});

t.test("text helpers: cutting never splits a character, Retry-After, RFC 2047", async (t) => {
  t.equal(cut("abcdef", 4), "abc…");
  t.equal(cut("abc", 3), "abc");
  t.equal(cut("ab😀cd", 4), "ab…", "a surrogate pair is not split");
  t.equal(cutBytes("aü😀x", 7), "aü…", "1 + 2 + 3 bytes: the emoji does not fit");
  t.equal(cutBytes("aü😀", 7), "aü😀", "exactly 7 bytes: kept");
  t.equal(cutBytes("日本語", 9), "日本語");
  t.ok(Buffer.byteLength(cutBytes("😀".repeat(2000), 4096)) <= 4096);
  t.equal(retryAfterMs({ "Retry-After": "7" }), 7000);
  t.equal(retryAfterMs({ "retry-after": ["3", "9"] }), 3000);
  t.equal(retryAfterMs({ "retry-after": "soon" }), undefined);
  t.equal(retryAfterMs({}), undefined);
  t.equal(
    retryAfterMs({ "retry-after": "Wed, 21 Oct 2015 07:28:00 GMT", date: "Wed, 21 Oct 2015 07:27:50 GMT" }),
    10_000,
  );
  t.equal(retryAfterMs({ "retry-after": "Wed, 21 Oct 2015 07:28:00 GMT" }), 0, "a date in the past: now");
  for (const s of [
    "plain title",
    "Überwachung ✓ 日本 — 🚨",
    "🚨".repeat(40),
    "=?UTF-8?B?x?= looks encoded",
    "",
  ]) {
    const h = encodeHeader(s);
    t.match(h, /^[\x20-\x7e]*$/, "ASCII");
    t.equal(decodeRfc2047(h), s, `round trip of ${JSON.stringify(s.slice(0, 20))}`);
    for (const w of h.match(/=\?[^?]+\?B\?[^?]*\?=/g) ?? [])
      t.ok(w.length <= 75, "an encoded-word of at most 75 characters");
  }
});

t.test("the receivers refuse what the providers refuse (their checks are not vacuous)", async (t) => {
  const broken: [ProviderType, (r: ProviderRequest) => ProviderRequest, RegExp][] = [
    [
      "slack",
      (r) => ({
        ...r,
        body: r.body.replace(
          /"text":"🔴 Critical: alice n8n is down","emoji"/,
          `"text":"${"x".repeat(151)}","emoji"`,
        ),
      }),
      /151 characters, more than 150/,
    ],
    ["slack", (r) => ({ ...r, body: r.body.replace("3 probes", "<!channel> 3 probes") }), /unescaped < or >/],
    [
      "teams",
      (r) => ({ ...r, body: r.body.replace('"version":"1.4"', '"version":"1.5"') }),
      /version 1.5, expected 1.4/,
    ],
    [
      "discord",
      (r) => ({ ...r, body: r.body.replace('"3 probes', `"${"x".repeat(5990)}`) }),
      /more than (4096|6000)/,
    ],
    ["discord", (r) => ({ ...r, url: new URL(r.url.href.replace("&wait=true", "")) }), /wait=true/],
    [
      "pagerduty",
      (r) => ({ ...r, body: r.body.replace('"event_action":"trigger"', '"event_action":"escalate"') }),
      /event_action escalate/,
    ],
    [
      "pagerduty",
      (r) => ({ ...r, body: r.body.replace('"severity":"critical"', '"severity":"fatal"') }),
      /payload.severity fatal/,
    ],
    [
      "opsgenie",
      (r) => ({ ...r, body: r.body.replace('"message":"', `"message":"${"x".repeat(120)}`) }),
      /message is \d+ characters, more than 130/,
    ],
    ["opsgenie", (r) => ({ ...r, headers: { ...r.headers, authorization: "Bearer x" } }), /GenieKey/],
    ["telegram", (r) => ({ ...r, body: r.body.replace("3 probes", "3 < probes") }), /raw </],
    ["telegram", (r) => ({ ...r, body: r.body.replace("<b>", "<b><i>") }), /(unclosed tags|closes nothing)/],
    ["ntfy", (r) => ({ ...r, body: "x".repeat(4097) }), /4097 bytes/],
    ["ntfy", (r) => ({ ...r, headers: { ...r.headers, priority: "6" } }), /Priority 6/],
  ];
  for (const [type, breakIt, problem] of broken) {
    const w = await world(t, type);
    const answer = await send(breakIt(w.provider.request(ALERTS.failure, w.settings)));
    t.equal(answer.status, 400, `${type}: refused`);
    t.match(w.rx.last()?.problems.join("; "), problem, `${type}: ${String(problem)}`);
  }
});
