import http from "node:http";
import type { AddressInfo } from "node:net";
import t, { type Test } from "tap";
import { MAX_CHANNELS_PER_ACCOUNT, settingsOf } from "../../src/channels/channels.js";
import { selectChannel } from "../../src/channels/repository.js";
import { addMember, createKey } from "../../src/identity/accounts.js";
import { type TestApp, testApp } from "../helpers/app.js";
import { requireBackend } from "../helpers/backends.js";
import { call, seedTenants } from "../helpers/tenants.js";
import { verifyVigilSignature } from "../webhooks/fixtures/receiver.js";

/**
 * /v1/channels, /v1/routing-rules and /v1/notification-settings (docs/channels.md): every channel
 * type is created with its settings checked and its secrets stored encrypted and never answered;
 * each account sees and changes only its own (an organization's need its admin or owner); bad
 * input is a 400 naming the field with nothing stored; a test send reaches a real receiver on
 * loopback and reports the provider's answer (a refused credential is a 400 naming it).
 */

const ABSENT = "00000000-0000-4000-8000-000000000000";

interface Channel {
  id: string;
  type: string;
  name: string;
  settings: Record<string, unknown>;
  secret_settings: string[];
  hint: string;
  organization_id: string | null;
  created_at: string;
  updated_at: string;
  signing_secret?: string;
}

interface Rule {
  id: string;
  channel_ids: string[];
  kinds: string[] | null;
  connection_ids: string[] | null;
  send_recoveries: boolean;
  escalate_after_minutes: number | null;
  repeat_every_minutes: number | null;
  escalation_channel_ids: string[];
  organization_id: string | null;
}

/** One valid channel of every type, with the secret values its answer must never hold. */
const EXAMPLES: {
  type: string;
  settings: Record<string, unknown>;
  secrets: string[];
  secretFields: string[];
  plain: Record<string, unknown>;
  hint: RegExp;
}[] = [
  {
    type: "email",
    settings: { addresses: ["oncall@a.example", "lead@a.example"] },
    secrets: [],
    secretFields: [],
    plain: { addresses: ["oncall@a.example", "lead@a.example"] },
    hint: /^oncall@a\.example and 1 more$/,
  },
  {
    type: "webhook",
    settings: { url: "https://hooks.example.com/vigil/WEBHOOK-PATH-SECRET-1a2b" },
    secrets: ["WEBHOOK-PATH-SECRET-1a2b"],
    secretFields: ["url"],
    plain: {},
    hint: /^https:\/\/hooks\.example\.com\/…1a2b$/,
  },
  {
    type: "slack",
    settings: { webhook_url: "https://hooks.slack.com/services/T0AAA/B0BBB/SLACKSECRET3c4d" },
    secrets: ["SLACKSECRET3c4d", "/services/T0AAA/B0BBB/SLACKSECRET3c4d"],
    secretFields: ["webhook_url"],
    plain: {},
    hint: /^hooks\.slack\.com\/…3c4d$/,
  },
  {
    type: "teams",
    settings: {
      webhook_url:
        "https://prod-01.westeurope.logic.azure.com/workflows/abc123/triggers/manual/paths/invoke?api-version=2016-06-01&sig=TEAMSSIG5e6f",
    },
    secrets: ["TEAMSSIG5e6f"],
    secretFields: ["webhook_url"],
    plain: {},
    hint: /^prod-01\.westeurope\.logic\.azure\.com\/…5e6f$/,
  },
  {
    type: "discord",
    settings: { webhook_url: "https://discord.com/api/webhooks/123456/DISCORDTOKEN7a8b" },
    secrets: ["DISCORDTOKEN7a8b"],
    secretFields: ["webhook_url"],
    plain: {},
    hint: /^discord\.com\/…7a8b$/,
  },
  {
    type: "pagerduty",
    settings: { routing_key: "R0UTINGKEY0123456789abcdefGHIJKL" },
    secrets: ["R0UTINGKEY0123456789abcdefGHIJKL"],
    secretFields: ["routing_key"],
    plain: {},
    hint: /^routing key …IJKL$/,
  },
  {
    type: "opsgenie",
    settings: { api_key: "0f0e0d0c-1b2a-4c3d-8e9f-a1b2c3d4e5f6", api_url: "https://api.eu.opsgenie.com" },
    secrets: ["0f0e0d0c-1b2a-4c3d-8e9f-a1b2c3d4e5f6"],
    secretFields: ["api_key"],
    plain: { api_url: "https://api.eu.opsgenie.com" },
    hint: /^api key …e5f6 \(api\.eu\.opsgenie\.com\)$/,
  },
  {
    type: "telegram",
    settings: { bot_token: "123456:ABCdefGHIjklMNOpqrSTUvwxYZ0123456789", chat_id: -1001234567890 },
    secrets: ["123456:ABCdefGHIjklMNOpqrSTUvwxYZ0123456789", "ABCdefGHIjklMNOpqrSTUvwxYZ0123456789"],
    secretFields: ["bot_token"],
    plain: { chat_id: -1001234567890 },
    hint: /^chat -1001234567890$/,
  },
  {
    type: "ntfy",
    settings: {
      topic_url: "https://ntfy.sh/vigil-NTFYTOPIC9c0d",
      token: "tk_NTFYTOKEN0123456789",
      priority: 5,
    },
    secrets: ["vigil-NTFYTOPIC9c0d", "tk_NTFYTOKEN0123456789"],
    secretFields: ["topic_url", "token"],
    plain: { priority: 5 },
    hint: /^ntfy\.sh\//,
  },
];

const count = async (ta: TestApp, table: "channels" | "routing_rules") =>
  Number(
    (await ta.ctx.stores.db.query<{ n: number | string }>(`SELECT count(*) AS n FROM ${table}`)).rows[0]?.n,
  );

const row = async (ta: TestApp, id: string) => {
  const r = await selectChannel(ta.ctx.stores.db, id);
  if (!r) throw new Error(`channel ${id} is not stored`);
  return r;
};

/** Creates a channel and answers it (the test fails when it is not a 201). */
async function create(t: Test, ta: TestApp, key: string, body: Record<string, unknown>): Promise<Channel> {
  const res = await call(ta.app, key, "POST", "/v1/channels", body);
  t.equal(res.statusCode, 201, `POST ${String(body.type)} channel: 201`, { body: res.body });
  return res.json() as Channel;
}

/** An organization key of dave's, made while he was org A's admin; he is a plain member again. */
async function memberOrgKey(ta: TestApp, w: Awaited<ReturnType<typeof seedTenants>>) {
  const db = ta.ctx.stores.db;
  await addMember(db, { org: w.orgs.orgA.id, user: w.users.dave.id, role: "admin" });
  const key = (
    await createKey(db, {
      user: w.users.dave.id,
      org: w.orgs.orgA.id,
      permissions: ["connections:read", "connections:write"],
    })
  ).key;
  await addMember(db, { org: w.orgs.orgA.id, user: w.users.dave.id, role: "member" });
  return key;
}

for (const backend of ["pglite", "postgres"] as const) {
  t.test(
    `channels of every type: created, listed, changed, removed; secrets never answered (${backend})`,
    async (t) => {
      if (!(await requireBackend(t, backend))) return;
      const ta = await testApp(t, { relational: backend });
      const { app, ctx } = ta;
      const w = await seedTenants(ta);
      const alice = w.keys.alicePersonal;

      const made = new Map<string, Channel>();
      for (const ex of EXAMPLES) {
        const res = await call(app, alice, "POST", "/v1/channels", {
          type: ex.type,
          name: `  alice ${ex.type}  `,
          settings: ex.settings,
        });
        t.equal(res.statusCode, 201, `${ex.type}: 201`, { body: res.body });
        const c = res.json() as Channel;
        made.set(ex.type, c);
        t.match(
          c,
          {
            id: /^[0-9a-f-]{36}$/,
            type: ex.type,
            name: `alice ${ex.type}`,
            hint: ex.hint,
            organization_id: null,
            created_at: String,
            updated_at: String,
          },
          `${ex.type}: the answer`,
        );
        t.same(c.settings, ex.plain, `${ex.type}: only the settings that are not secret are answered`);
        t.same(c.secret_settings, ex.secretFields, `${ex.type}: the secret settings are named`);
        for (const s of ex.secrets) t.notOk(res.body.includes(s), `${ex.type}: the answer never holds ${s}`);
        for (const [k, v] of Object.entries(ex.settings))
          if (ex.secretFields.includes(k))
            t.notOk(res.body.includes(String(v)), `${ex.type}: nor the whole ${k}`);
        if (ex.type === "webhook")
          t.match(c.signing_secret, /^whsec_[A-Za-z0-9_-]{20,}$/, "webhook: signing secret once");
        else t.notOk("signing_secret" in c, `${ex.type}: no signing secret`);

        // at rest: the secrets encrypted, nothing of them in the clear
        const stored = (
          await ctx.stores.db.query<Record<string, unknown>>("SELECT * FROM channels WHERE id = $1", [c.id])
        ).rows[0];
        const text = JSON.stringify(stored);
        for (const s of ex.secrets) t.notOk(text.includes(s), `${ex.type}: ${s} is not stored in the clear`);
        if (ex.secretFields.length)
          t.match(stored, { secrets_enc: /^v1\./ }, `${ex.type}: secrets_enc is sealed`);
        else t.equal(stored?.secrets_enc, null, `${ex.type}: nothing secret, nothing sealed`);
        if (c.signing_secret) {
          t.notOk(text.includes(c.signing_secret.slice(6)), "the signing secret is not stored in the clear");
          t.equal(
            ctx.credentials.decrypt(String(stored?.signing_secret_enc)),
            c.signing_secret,
            "the box opens it",
          );
        }
        const whole = settingsOf(ctx, await row(ta, c.id));
        for (const [k, v] of Object.entries(ex.settings))
          t.same(
            // stored as parsed, except that the root's added slash is not (api_url as written)
            typeof v === "string" && k.endsWith("url") && new URL(v).href !== `${v}/` ? new URL(v).href : v,
            whole[k],
            `${ex.type}: ${k} reads back`,
          );
      }

      // listed and read without secrets, oldest first
      const list = await call(app, alice, "GET", "/v1/channels");
      t.equal(list.statusCode, 200);
      const listed = (list.json() as { channels: Channel[] }).channels;
      t.same(
        listed.map((c) => c.type),
        EXAMPLES.map((e) => e.type),
        "every channel, in creation order",
      );
      const signing = made.get("webhook")?.signing_secret ?? "";
      const allSecrets = [...EXAMPLES.flatMap((e) => e.secrets), signing];
      for (const s of allSecrets)
        t.notOk(list.body.includes(s), `GET /v1/channels never holds ${s.slice(0, 12)}…`);
      t.notOk(list.body.includes("signing_secret"), "nor a signing secret field");
      for (const [type, c] of made) {
        const one = await call(app, alice, "GET", `/v1/channels/${c.id}`);
        t.equal(one.statusCode, 200);
        const { signing_secret: _shownOnce, ...rest } = c;
        t.same(
          one.json(),
          rest,
          `GET /v1/channels/{id} (${type}) is the creation answer without the signing secret`,
        );
        for (const s of allSecrets) t.notOk(one.body.includes(s), `GET ${type} never holds a secret`);
      }
      t.equal(
        (await call(app, alice, "GET", `/v1/channels/${made.get("slack")?.id.toUpperCase()}`)).statusCode,
        200,
        "an id is case-insensitive",
      );
      t.equal(
        (await call(app, w.keys.aliceReadOnly, "GET", "/v1/channels")).statusCode,
        200,
        "read-only key lists",
      );
      t.equal(
        (
          await call(app, w.keys.aliceReadOnly, "POST", "/v1/channels", {
            type: "email",
            name: "x",
            settings: {},
          })
        ).statusCode,
        403,
        "but cannot add",
      );

      // PUT: the name only keeps every secret
      const ntfy = made.get("ntfy") as Channel;
      const before = settingsOf(ctx, await row(ta, ntfy.id));
      const renamed = await call(app, alice, "PUT", `/v1/channels/${ntfy.id}`, { name: "phones" });
      t.equal(renamed.statusCode, 200, renamed.body);
      t.match(renamed.json(), {
        id: ntfy.id,
        name: "phones",
        hint: ntfy.hint,
        secret_settings: ["topic_url", "token"],
      });
      t.same(settingsOf(ctx, await row(ta, ntfy.id)), before, "renaming keeps the secrets");
      // PUT settings: merged over the stored ones
      const merged = await call(app, alice, "PUT", `/v1/channels/${ntfy.id}`, { settings: { priority: 2 } });
      t.equal(merged.statusCode, 200, merged.body);
      t.same((merged.json() as Channel).settings, { priority: 2 });
      t.same(
        settingsOf(ctx, await row(ta, ntfy.id)),
        { ...before, priority: 2 },
        "the secrets left out are kept",
      );
      const token = await call(app, alice, "PUT", `/v1/channels/${ntfy.id}`, {
        settings: { token: "tk_ROTATED0123456789" },
      });
      t.equal(token.statusCode, 200, token.body);
      t.notOk(token.body.includes("tk_ROTATED0123456789"), "a new secret is not answered either");
      t.same(
        settingsOf(ctx, await row(ta, ntfy.id)),
        { ...before, priority: 2, token: "tk_ROTATED0123456789" },
        "one secret changed, the other kept",
      );
      const slack = made.get("slack") as Channel;
      const moved = await call(app, alice, "PUT", `/v1/channels/${slack.id}`, {
        settings: { webhook_url: "https://hooks.slack.com/services/T0AAA/B0BBB/NEWSECRETzz99" },
      });
      t.equal(moved.statusCode, 200, moved.body);
      t.equal((moved.json() as Channel).hint, "hooks.slack.com/…zz99", "the hint follows the new URL");
      t.notOk(moved.body.includes("NEWSECRETzz99"));
      t.equal(
        (await call(app, alice, "PUT", `/v1/channels/${slack.id}`, { type: "slack" })).statusCode,
        200,
        "the same type is no change",
      );
      const retype = await call(app, alice, "PUT", `/v1/channels/${slack.id}`, { type: "teams" });
      t.equal(retype.statusCode, 400);
      t.match(retype.json().error, {
        code: "VALIDATION_ERROR",
        message: /^body\.type: cannot change \(the channel is slack\)/,
      });
      const badPut = await call(app, alice, "PUT", `/v1/channels/${slack.id}`, {
        settings: { webhook_url: "ftp://hooks.slack.com/x" },
      });
      t.equal(badPut.statusCode, 400);
      t.match(badPut.json().error.message, /^body\.settings\.webhook_url: /);
      t.equal(
        settingsOf(ctx, await row(ta, slack.id)).webhook_url,
        "https://hooks.slack.com/services/T0AAA/B0BBB/NEWSECRETzz99",
        "a refused change stores nothing",
      );
      const unknownPut = await call(app, alice, "PUT", `/v1/channels/${slack.id}`, { color: "red" });
      t.equal(unknownPut.statusCode, 400);
      t.match(unknownPut.json().error.message, /^body\.color: is not a known field/);

      // other accounts: not found, whatever they try
      for (const key of [w.keys.carolPersonal, w.keys.bobPersonal, w.keys.aliceOrgA]) {
        t.same(
          (await call(app, key, "GET", "/v1/channels")).json(),
          { channels: [] },
          "another account lists none",
        );
        for (const [method, url, body] of [
          ["GET", `/v1/channels/${slack.id}`, undefined],
          ["PUT", `/v1/channels/${slack.id}`, { name: "mine now" }],
          ["DELETE", `/v1/channels/${slack.id}`, undefined],
          ["POST", `/v1/channels/${slack.id}/test`, undefined],
        ] as const) {
          const res = await call(app, key, method, url, body);
          t.equal(res.statusCode, 404, `another account: ${method} ${url.slice(0, 20)}… is 404`);
          t.match(res.json(), {
            success: false,
            error: { code: "NOT_FOUND", message: /^Channel .* not found$/ },
          });
        }
      }
      t.equal((await row(ta, slack.id)).name, "alice slack", "nothing changed");
      t.equal(
        (await call(app, alice, "GET", `/v1/channels/${ABSENT}`)).statusCode,
        404,
        "an absent one is the same",
      );
      const badId = await call(app, alice, "GET", "/v1/channels/not-a-uuid");
      t.equal(badId.statusCode, 400);
      t.match(badId.json().error.message, /^params\.id: /);

      // removed
      const del = await call(app, alice, "DELETE", `/v1/channels/${slack.id}`);
      t.equal(del.statusCode, 200);
      t.same(del.json(), { id: slack.id, deleted: true });
      t.equal((await call(app, alice, "GET", `/v1/channels/${slack.id}`)).statusCode, 404, "gone");
      t.equal(
        (await call(app, alice, "DELETE", `/v1/channels/${slack.id}`)).statusCode,
        404,
        "gone for DELETE too",
      );
      t.equal(
        ((await call(app, alice, "GET", "/v1/channels")).json() as { channels: unknown[] }).channels.length,
        EXAMPLES.length - 1,
      );
    },
  );
}

t.test("bad channels: a 400 naming the field, nothing stored", async (t) => {
  const ta = await testApp(t, { env: { PUBLIC_URL: "https://vigil.example.com" } });
  const w = await seedTenants(ta);
  const slack = "https://hooks.slack.com/services/T/B/x";
  const cases: [string, unknown, RegExp][] = [
    [
      "an unknown type",
      { type: "sms", name: "x", settings: {} },
      /^body\.type: must be one of email, webhook, slack/,
    ],
    ["no type", { name: "x", settings: {} }, /^body\.type: is required/],
    [
      "a malformed routing key",
      { type: "pagerduty", name: "x", settings: { routing_key: "not-32-chars" } },
      /^body\.settings\.routing_key: routing_key must be the 32-character integration key .*\(a pagerduty channel\)$/,
    ],
    [
      "a webhook_url that is no URL",
      { type: "slack", name: "x", settings: { webhook_url: "hooks.slack.com/services/x" } },
      /^body\.settings\.webhook_url: webhook_url must be the Slack incoming webhook URL/,
    ],
    [
      "an http webhook_url to a public host",
      { type: "slack", name: "x", settings: { webhook_url: "http://hooks.slack.com/services/x" } },
      /^body\.settings\.webhook_url: must be an https URL; plain http is accepted only to a loopback host$/,
    ],
    [
      "an http webhook channel URL",
      { type: "webhook", name: "x", settings: { url: "http://hooks.example.com/x" } },
      /^body\.settings\.url: must be an https URL/,
    ],
    [
      "a webhook channel at the service itself",
      { type: "webhook", name: "x", settings: { url: "https://vigil.example.com/v1/channels" } },
      /^body\.settings\.url: must not point at this Vigil service itself/,
    ],
    [
      "an api_url at a metadata address",
      {
        type: "pagerduty",
        name: "x",
        settings: { routing_key: "a".repeat(32), api_url: "https://169.254.169.254" },
      },
      /^body\.settings\.api_url: /,
    ],
    [
      "priority 6",
      { type: "ntfy", name: "x", settings: { topic_url: "https://ntfy.sh/t", priority: 6 } },
      /^body\.settings\.priority: priority must be from 1 \(min\) to 5 \(max\)/,
    ],
    [
      "an unknown settings field",
      { type: "slack", name: "x", settings: { webhook_url: slack, channel: "#ops" } },
      /^body\.settings\.channel: is not a known field/,
    ],
    [
      "a missing setting",
      { type: "telegram", name: "x", settings: { bot_token: "123456:ABCdefGHIjklMNOpqrSTUvwxYZ0123456789" } },
      /^body\.settings\.chat_id: is required/,
    ],
    [
      "a bad e-mail address",
      { type: "email", name: "x", settings: { addresses: ["oncall@a.example", "nope"] } },
      /^body\.settings\.addresses\.1: must be e-mail addresses/,
    ],
    [
      "no addresses",
      { type: "email", name: "x", settings: { addresses: [] } },
      /^body\.settings\.addresses: must name at least one/,
    ],
    [
      "an empty name",
      { type: "slack", name: "   ", settings: { webhook_url: slack } },
      /^body\.name: must not be empty$/,
    ],
    [
      "a long name",
      { type: "slack", name: "n".repeat(101), settings: { webhook_url: slack } },
      /^body\.name: must be at most 100/,
    ],
    ["no settings", { type: "slack", name: "x" }, /^body\.settings: is required/],
    [
      "settings not an object",
      { type: "slack", name: "x", settings: [slack] },
      /^body\.settings: must be an object/,
    ],
    [
      "an unknown field",
      { type: "slack", name: "x", settings: { webhook_url: slack }, secret: "y" },
      /^body\.secret: is not a known field/,
    ],
  ];
  for (const [what, body, message] of cases) {
    const res = await call(ta.app, w.keys.alicePersonal, "POST", "/v1/channels", body);
    t.equal(res.statusCode, 400, `${what}: 400`, { body: res.body });
    t.match(res.json(), { success: false, error: { code: "VALIDATION_ERROR", message } }, what);
  }
  t.equal(await count(ta, "channels"), 0, "nothing stored");
});

t.test("an organization's channels: its keys see them; only admins and owners change them", async (t) => {
  const ta = await testApp(t);
  const { app } = ta;
  const w = await seedTenants(ta);
  const daveOrg = await memberOrgKey(ta, w);
  const org = await create(t, ta, w.keys.aliceOrgA, {
    type: "email",
    name: "org A on-call",
    settings: { addresses: ["oncall@a.example"] },
  });
  t.equal(org.organization_id, w.orgs.orgA.id, "the organization's");
  const rule = await call(app, w.keys.aliceOrgA, "POST", "/v1/routing-rules", { channel_ids: [org.id] });
  t.equal(rule.statusCode, 201, rule.body);
  const ruleId = (rule.json() as Rule).id;

  const listed = await call(app, daveOrg, "GET", "/v1/channels");
  t.same(
    (listed.json() as { channels: Channel[] }).channels.map((c) => c.id),
    [org.id],
    "a member's organization key lists them",
  );
  t.equal((await call(app, daveOrg, "GET", `/v1/channels/${org.id}`)).statusCode, 200, "and reads one");
  t.equal((await call(app, daveOrg, "GET", "/v1/routing-rules")).statusCode, 200, "and the rules");
  t.equal((await call(app, daveOrg, "GET", "/v1/notification-settings")).statusCode, 200, "and the settings");
  for (const [method, url, body] of [
    ["POST", "/v1/channels", { type: "email", name: "dave", settings: { addresses: ["dave@a.example"] } }],
    ["PUT", `/v1/channels/${org.id}`, { name: "dave's now" }],
    ["DELETE", `/v1/channels/${org.id}`, undefined],
    ["POST", `/v1/channels/${org.id}/test`, undefined],
    ["POST", "/v1/routing-rules", { channel_ids: [org.id] }],
    ["PUT", `/v1/routing-rules/${ruleId}`, { channel_ids: [org.id], kinds: ["audit"] }],
    ["DELETE", `/v1/routing-rules/${ruleId}`, undefined],
    ["PUT", "/v1/notification-settings", { email_owners: false }],
  ] as const) {
    const res = await call(app, daveOrg, method, url, body);
    t.equal(res.statusCode, 403, `a member's organization key: ${method} ${url} is 403`);
    t.match(res.json().error, {
      code: "FORBIDDEN",
      message: /admins and owners .* this key's user is a member/,
    });
  }
  t.equal(await count(ta, "channels"), 1, "nothing added");
  t.equal((await row(ta, org.id)).name, "org A on-call", "nothing changed");
  t.same(
    ((await call(app, w.keys.alicePersonal, "GET", "/v1/channels")).json() as { channels: unknown[] })
      .channels,
    [],
    "alice's personal account is another account",
  );
  t.equal(
    (await call(app, w.keys.ingest, "GET", "/v1/channels")).statusCode,
    403,
    "an ingestion key has none",
  );
});

t.test(`at most ${MAX_CHANNELS_PER_ACCOUNT} channels per account: 409`, async (t) => {
  const ta = await testApp(t);
  const w = await seedTenants(ta);
  const bob = w.keys.bobPersonal;
  const body = (i: number) => ({
    type: "email",
    name: `bob ${i}`,
    settings: { addresses: [`b${i}@b.example`] },
  });
  let first = "";
  for (let i = 0; i < MAX_CHANNELS_PER_ACCOUNT; i++) {
    const r = await call(ta.app, bob, "POST", "/v1/channels", body(i));
    if (r.statusCode !== 201) t.fail(`channel ${i}: ${r.statusCode} ${r.body}`);
    if (i === 0) first = (r.json() as Channel).id;
  }
  const full = await call(ta.app, bob, "POST", "/v1/channels", body(99));
  t.equal(full.statusCode, 409);
  t.match(full.json().error, {
    code: "CONFLICT",
    message: new RegExp(
      `at most ${MAX_CHANNELS_PER_ACCOUNT} channels and this one has ${MAX_CHANNELS_PER_ACCOUNT}; delete one`,
    ),
  });
  t.equal(
    (await call(ta.app, w.keys.bobOrgB, "POST", "/v1/channels", body(100))).statusCode,
    201,
    "the organization is an account of its own",
  );
  t.equal((await call(ta.app, bob, "DELETE", `/v1/channels/${first}`)).statusCode, 200);
  t.equal(
    (await call(ta.app, bob, "POST", "/v1/channels", body(99))).statusCode,
    201,
    "room again after a delete",
  );
});

for (const backend of ["pglite", "postgres"] as const) {
  t.test(`routing rules: created, listed, replaced, removed; references checked (${backend})`, async (t) => {
    if (!(await requireBackend(t, backend))) return;
    const ta = await testApp(t, { relational: backend });
    const { app } = ta;
    const w = await seedTenants(ta);
    const alice = w.keys.alicePersonal;
    const email = await create(t, ta, alice, {
      type: "email",
      name: "mail",
      settings: { addresses: ["a@a.example"] },
    });
    const pd = await create(t, ta, alice, {
      type: "pagerduty",
      name: "pager",
      settings: { routing_key: "b".repeat(32) },
    });
    const carols = await create(t, ta, w.keys.carolPersonal, {
      type: "email",
      name: "carol",
      settings: { addresses: ["c@c.example"] },
    });

    const plain = await call(app, alice, "POST", "/v1/routing-rules", { channel_ids: [email.id] });
    t.equal(plain.statusCode, 201, plain.body);
    t.match(plain.json(), {
      id: /^[0-9a-f-]{36}$/,
      channel_ids: [email.id],
      kinds: null,
      connection_ids: null,
      send_recoveries: true,
      escalate_after_minutes: null,
      repeat_every_minutes: null,
      escalation_channel_ids: [],
      organization_id: null,
      created_at: String,
      updated_at: String,
    });
    const full = {
      channel_ids: [email.id.toUpperCase()],
      kinds: ["failure", "missed_heartbeat", "anomaly"],
      connection_ids: [w.conns.PA],
      send_recoveries: false,
      escalate_after_minutes: 15,
      repeat_every_minutes: 60,
      escalation_channel_ids: [pd.id],
    };
    const esc = await call(app, alice, "POST", "/v1/routing-rules", full);
    t.equal(esc.statusCode, 201, esc.body);
    const rule = esc.json() as Rule;
    t.match(rule, { ...full, channel_ids: [email.id] }, "every field as sent (ids in lower case)");

    const list = await call(app, alice, "GET", "/v1/routing-rules");
    t.equal(list.statusCode, 200);
    t.same(
      (list.json() as { routing_rules: Rule[] }).routing_rules.map((r) => r.id),
      [(plain.json() as Rule).id, rule.id],
      "oldest first",
    );
    t.same((await call(app, alice, "GET", `/v1/routing-rules/${rule.id}`)).json(), esc.json(), "GET one");
    t.same(
      (await call(app, w.keys.carolPersonal, "GET", "/v1/routing-rules")).json(),
      { routing_rules: [] },
      "another account lists none",
    );
    for (const [method, body] of [
      ["GET", undefined],
      ["PUT", { channel_ids: [carols.id] }],
      ["DELETE", undefined],
    ] as const) {
      const res = await call(app, w.keys.carolPersonal, method, `/v1/routing-rules/${rule.id}`, body);
      t.equal(res.statusCode, 404, `another account: ${method} is 404`);
      t.match(res.json().error, { code: "NOT_FOUND", message: /^Routing rule .* not found$/ });
    }
    t.equal((await call(app, alice, "GET", `/v1/routing-rules/${ABSENT}`)).statusCode, 404);

    // PUT replaces: what is left out takes its default
    const put = await call(app, alice, "PUT", `/v1/routing-rules/${rule.id}`, {
      channel_ids: [pd.id],
      kinds: ["audit"],
    });
    t.equal(put.statusCode, 200, put.body);
    t.match(put.json(), {
      id: rule.id,
      channel_ids: [pd.id],
      kinds: ["audit"],
      connection_ids: null,
      send_recoveries: true,
      escalate_after_minutes: null,
      repeat_every_minutes: null,
      escalation_channel_ids: [],
    });

    // a channel a rule names cannot be removed
    const blocked = await call(app, alice, "DELETE", `/v1/channels/${pd.id}`);
    t.equal(blocked.statusCode, 409);
    t.match(blocked.json().error, {
      code: "CONFLICT",
      message: new RegExp(
        `^Channel ${pd.id} is named by routing rule ${rule.id}; change or delete it first$`,
      ),
    });
    t.equal((await call(app, alice, "GET", `/v1/channels/${pd.id}`)).statusCode, 200, "still there");

    // bad rules: 400 naming the field (403/404 for a connection), nothing stored
    const rules = await count(ta, "routing_rules");
    const cases: [string, unknown, number, RegExp][] = [
      [
        "an unknown kind",
        { channel_ids: [email.id], kinds: ["failure", "sms"] },
        400,
        /^body\.kinds\.1: must be kinds among failure, missed_heartbeat/,
      ],
      ["no kinds", { channel_ids: [email.id], kinds: [] }, 400, /^body\.kinds: must name at least one kind/],
      [
        "another account's channel",
        { channel_ids: [email.id, carols.id] },
        400,
        /^body\.channel_ids\.1: names no channel of this account/,
      ],
      [
        "an absent channel",
        { channel_ids: [ABSENT] },
        400,
        /^body\.channel_ids\.0: names no channel of this account/,
      ],
      [
        "a channel id that is no id",
        { channel_ids: ["slack"] },
        400,
        /^body\.channel_ids\.0: must be a channel id/,
      ],
      ["no channels", { channel_ids: [] }, 400, /^body\.channel_ids: must name at least one channel/],
      ["no channel_ids", {}, 400, /^body\.channel_ids: is required/],
      [
        "escalate_after_minutes 0",
        { channel_ids: [email.id], escalate_after_minutes: 0, escalation_channel_ids: [pd.id] },
        400,
        /^body\.escalate_after_minutes: must be at least 1 minute$/,
      ],
      [
        "escalate_after_minutes 1441",
        { channel_ids: [email.id], escalate_after_minutes: 1441, escalation_channel_ids: [pd.id] },
        400,
        /^body\.escalate_after_minutes: must be at most 1440 minutes/,
      ],
      [
        "escalate_after_minutes 1.5",
        { channel_ids: [email.id], escalate_after_minutes: 1.5, escalation_channel_ids: [pd.id] },
        400,
        /^body\.escalate_after_minutes: must be a whole number/,
      ],
      [
        "repeat without escalate",
        { channel_ids: [email.id], repeat_every_minutes: 30 },
        400,
        /^body\.repeat_every_minutes: needs escalate_after_minutes/,
      ],
      [
        "escalate without escalation channels",
        { channel_ids: [email.id], escalate_after_minutes: 10 },
        400,
        /^body\.escalation_channel_ids: must name at least one channel when escalate_after_minutes is set$/,
      ],
      [
        "escalation channels without escalate",
        { channel_ids: [email.id], escalation_channel_ids: [pd.id] },
        400,
        /^body\.escalate_after_minutes: is required when escalation_channel_ids names channels$/,
      ],
      [
        "another tenant's connection",
        { channel_ids: [email.id], connection_ids: [w.conns.PC] },
        403,
        /^body\.connection_ids\.0: no access to connection/,
      ],
      [
        "an absent connection",
        { channel_ids: [email.id], connection_ids: [w.conns.PA, ABSENT] },
        404,
        /^body\.connection_ids\.1: connection .* not found$/,
      ],
      [
        "a visible connection of another account (org A's, for a personal key)",
        { channel_ids: [email.id], connection_ids: [w.conns.OA] },
        400,
        /^body\.connection_ids\.0: connection .* is not one of this account's connections$/,
      ],
      [
        "no connections",
        { channel_ids: [email.id], connection_ids: [] },
        400,
        /^body\.connection_ids: must name at least one connection/,
      ],
      [
        "an unknown field",
        { channel_ids: [email.id], channels: [email.id] },
        400,
        /^body\.channels: is not a known field/,
      ],
    ];
    for (const [what, body, status, message] of cases) {
      const res = await call(app, alice, "POST", "/v1/routing-rules", body);
      t.equal(res.statusCode, status, `${what}: ${status}`, { body: res.body });
      t.match(res.json(), { success: false, error: { message } }, what);
      const put = await call(app, alice, "PUT", `/v1/routing-rules/${rule.id}`, body);
      t.equal(put.statusCode, status, `${what} (PUT): ${status}`, { body: put.body });
    }
    t.equal(await count(ta, "routing_rules"), rules, "nothing stored");
    t.match(
      (await call(app, alice, "GET", `/v1/routing-rules/${rule.id}`)).json(),
      { kinds: ["audit"] },
      "nothing changed",
    );

    // an organization's rule names the organization's connections
    const orgChannel = await create(t, ta, w.keys.aliceOrgA, {
      type: "email",
      name: "org",
      settings: { addresses: ["o@a.example"] },
    });
    const orgRule = await call(app, w.keys.aliceOrgA, "POST", "/v1/routing-rules", {
      channel_ids: [orgChannel.id],
      connection_ids: [w.conns.OA],
    });
    t.equal(orgRule.statusCode, 201, orgRule.body);
    t.match(orgRule.json(), { organization_id: w.orgs.orgA.id, connection_ids: [w.conns.OA] });
    const orgForeign = await call(app, w.keys.aliceOrgA, "POST", "/v1/routing-rules", {
      channel_ids: [orgChannel.id],
      connection_ids: [w.conns.PA],
    });
    t.equal(orgForeign.statusCode, 403, "an organization key does not see alice's personal connection");

    // removed; then the channel can go
    const del = await call(app, alice, "DELETE", `/v1/routing-rules/${rule.id}`);
    t.equal(del.statusCode, 200);
    t.same(del.json(), { id: rule.id, deleted: true });
    t.equal((await call(app, alice, "GET", `/v1/routing-rules/${rule.id}`)).statusCode, 404, "gone");
    t.equal((await call(app, alice, "DELETE", `/v1/routing-rules/${rule.id}`)).statusCode, 404);
    t.equal(
      (await call(app, alice, "DELETE", `/v1/channels/${pd.id}`)).statusCode,
      200,
      "the channel goes now",
    );
  });
}

t.test("notification settings: the owners' e-mail switch, per account", async (t) => {
  const ta = await testApp(t);
  const { app, ctx } = ta;
  const w = await seedTenants(ta);
  const alice = w.keys.alicePersonal;
  t.same(
    (await call(app, alice, "GET", "/v1/notification-settings")).json(),
    { email_owners: true },
    "on by default",
  );
  const off = await call(app, alice, "PUT", "/v1/notification-settings", { email_owners: false });
  t.equal(off.statusCode, 200);
  t.same(off.json(), { email_owners: false });
  t.same(
    (await call(app, alice, "GET", "/v1/notification-settings")).json(),
    { email_owners: false },
    "kept",
  );
  const stored = await ctx.stores.db.query<{ alert_email: boolean }>(
    "SELECT alert_email FROM users WHERE id = $1",
    [w.users.alice.id],
  );
  t.equal(stored.rows[0]?.alert_email, false, "stored on the user");
  t.same(
    (await call(app, w.keys.aliceOrgA, "GET", "/v1/notification-settings")).json(),
    { email_owners: true },
    "the organization is another account",
  );
  t.same(
    (await call(app, w.keys.aliceOrgA, "PUT", "/v1/notification-settings", { email_owners: false })).json(),
    {
      email_owners: false,
    },
  );
  const org = await ctx.stores.db.query<{ alert_email: boolean }>(
    "SELECT alert_email FROM organizations WHERE id = $1",
    [w.orgs.orgA.id],
  );
  t.equal(org.rows[0]?.alert_email, false, "stored on the organization");
  t.same((await call(app, alice, "PUT", "/v1/notification-settings", { email_owners: true })).json(), {
    email_owners: true,
  });
  for (const [what, body, message] of [
    ["a string", { email_owners: "yes" }, /^body\.email_owners: must be true or false$/],
    ["null", { email_owners: null }, /^body\.email_owners: /],
    ["missing", {}, /^body\.email_owners: is required/],
    ["an unknown field", { email_owners: true, sms: true }, /^body\.sms: is not a known field/],
  ] as const) {
    const res = await call(app, alice, "PUT", "/v1/notification-settings", body);
    t.equal(res.statusCode, 400, `${what}: 400`);
    t.match(res.json().error, { code: "VALIDATION_ERROR", message }, what);
  }
  t.equal(
    (await call(app, w.keys.aliceReadOnly, "PUT", "/v1/notification-settings", { email_owners: false }))
      .statusCode,
    403,
    "a read-only key cannot change it",
  );
});

// --- test sends, to a receiver on loopback ---

interface Got {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** A receiver on 127.0.0.1 that records every request and answers what `reply` says (200 "ok" by default). */
async function receiver(t: Test) {
  const got: Got[] = [];
  const control = {
    reply: (_g: Got): { status: number; body: string; type?: string } => ({ status: 200, body: "ok" }),
  };
  const server = http.createServer((req, res) => {
    let body = "";
    req.setEncoding("utf8");
    req.on("data", (c: string) => (body += c));
    req.on("end", () => {
      const g = { method: req.method ?? "", path: req.url ?? "", headers: req.headers, body };
      got.push(g);
      const r = control.reply(g);
      res.writeHead(r.status, { "content-type": r.type ?? "text/plain" });
      res.end(r.body);
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.teardown(
    () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  );
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, got, control };
}

t.test("test sends reach the provider and report its answer", async (t) => {
  const ta = await testApp(t, { env: { WEBHOOK_ALLOW_HTTP_LOOPBACK: "true" } });
  const { app, ctx } = ta;
  const w = await seedTenants(ta);
  const alice = w.keys.alicePersonal;
  const rx = await receiver(t);
  const json = (status: number, body: unknown) => ({
    status,
    body: JSON.stringify(body),
    type: "application/json",
  });
  const testOf = (c: Channel) => call(app, alice, "POST", `/v1/channels/${c.id}/test`);

  await t.test("slack: one message, the receiver's answer reported; a rename keeps the URL", async (t) => {
    const slack = await create(t, ta, alice, {
      type: "slack",
      name: "ops",
      settings: { webhook_url: `${rx.url}/services/T0/B0/SLACKPATHSECRET` },
    });
    const renamed = await call(app, alice, "PUT", `/v1/channels/${slack.id}`, { name: "ops (renamed)" });
    t.equal(renamed.statusCode, 200);
    rx.got.length = 0;
    const res = await testOf(slack);
    t.equal(res.statusCode, 200, res.body);
    t.same(res.json(), {
      id: slack.id,
      type: "slack",
      ok: true,
      sent: [{ event: "info", status: 200, answer: "ok" }],
    });
    t.equal(rx.got.length, 1, "one request");
    t.match(rx.got[0], { method: "POST", path: "/services/T0/B0/SLACKPATHSECRET" });
    const message = JSON.parse(rx.got[0]?.body ?? "{}") as { text?: string };
    t.match(message.text, /Test.*ops \(renamed\)/, "the test names the channel by its new name");
    t.notOk(res.body.includes("SLACKPATHSECRET"), "the answer names no secret");
  });

  await t.test("pagerduty: a trigger, then its resolve, on the same dedup_key", async (t) => {
    const pd = await create(t, ta, alice, {
      type: "pagerduty",
      name: "pager",
      settings: { routing_key: "R0UTINGKEY0123456789abcdefGHIJKL", api_url: `${rx.url}/pd` },
    });
    rx.got.length = 0;
    rx.control.reply = () => json(202, { status: "success", message: "Event processed", dedup_key: "k" });
    const res = await testOf(pd);
    t.equal(res.statusCode, 200, res.body);
    t.match(res.json(), {
      ok: true,
      sent: [
        { event: "trigger", status: 202, answer: /Event processed/ },
        { event: "resolve", status: 202 },
      ],
    });
    t.equal(rx.got.length, 2, "two requests");
    const [trigger, resolve] = rx.got.map((g) => JSON.parse(g.body) as Record<string, unknown>);
    t.same(
      rx.got.map((g) => g.path),
      ["/pd/v2/enqueue", "/pd/v2/enqueue"],
      "the Events API at api_url",
    );
    t.match(trigger, {
      event_action: "trigger",
      routing_key: "R0UTINGKEY0123456789abcdefGHIJKL",
      payload: { severity: "info" },
    });
    t.match(resolve, { event_action: "resolve", routing_key: "R0UTINGKEY0123456789abcdefGHIJKL" });
    t.ok(typeof trigger?.dedup_key === "string" && trigger.dedup_key.length > 0, "a dedup_key");
    t.equal(resolve?.dedup_key, trigger?.dedup_key, "the resolve closes the test alert");

    rx.got.length = 0;
    rx.control.reply = () =>
      json(400, {
        status: "invalid event",
        message: "Event object is invalid",
        errors: ["Invalid routing key"],
      });
    const refused = await testOf(pd);
    t.equal(refused.statusCode, 400, refused.body);
    t.match(refused.json().error, {
      code: "VALIDATION_ERROR",
      message: /^settings\.routing_key: pagerduty refused it: HTTP 400: .*Invalid routing key/,
    });
    t.notOk(refused.body.includes("R0UTINGKEY0123456789abcdefGHIJKL"), "the key is not in the answer");
    t.equal(rx.got.length, 1, "no resolve after a refused trigger");
  });

  await t.test("telegram: a 401 refuses the bot token", async (t) => {
    const token = "123456:ABCdefGHIjklMNOpqrSTUvwxYZ0123456789";
    const tg = await create(t, ta, alice, {
      type: "telegram",
      name: "chat",
      settings: { bot_token: token, chat_id: 42, api_url: rx.url },
    });
    rx.got.length = 0;
    rx.control.reply = () => json(401, { ok: false, error_code: 401, description: "Unauthorized" });
    const res = await testOf(tg);
    t.equal(res.statusCode, 400, res.body);
    t.match(res.json().error, {
      message: /^settings\.bot_token: telegram refused it: HTTP 401: Unauthorized/,
    });
    t.notOk(res.body.includes(token), "the token is not in the answer");
    t.equal(rx.got[0]?.path, `/bot${token}/sendMessage`, "sent to the Bot API path");
  });

  await t.test("a provider failing otherwise: 503 with its answer", async (t) => {
    const teams = await create(t, ta, alice, {
      type: "teams",
      name: "teams",
      settings: { webhook_url: `${rx.url}/workflows/x/invoke?sig=TEAMSSIG0000` },
    });
    rx.control.reply = () => ({ status: 500, body: "the flow broke" });
    const res = await testOf(teams);
    t.equal(res.statusCode, 503, res.body);
    t.match(res.json(), {
      success: false,
      error: {
        code: "PROVIDER_FAILED",
        message: /^The teams test send failed: HTTP 500: the flow broke$/,
        details: { status: 500, answer: "the flow broke" },
      },
    });
    t.notOk(res.body.includes("TEAMSSIG0000"));
  });

  await t.test("a webhook channel: a signed POST", async (t) => {
    const hook = await create(t, ta, alice, {
      type: "webhook",
      name: "receiver",
      settings: { url: `${rx.url}/hook/WEBHOOKPATHSECRET` },
    });
    rx.got.length = 0;
    rx.control.reply = () => ({ status: 200, body: "ok" });
    const res = await testOf(hook);
    t.equal(res.statusCode, 200, res.body);
    t.same((res.json() as { sent: unknown }).sent, [{ event: "info", status: 200, answer: "accepted" }]);
    const g = rx.got[0];
    t.match(JSON.parse(g?.body ?? "{}"), { kind: "test" });
    t.ok(
      verifyVigilSignature(g?.body ?? "", String(g?.headers["vigil-signature"]), hook.signing_secret ?? ""),
      "signed with the secret shown at creation",
    );
    rx.control.reply = () => ({ status: 500, body: "down" });
    t.equal((await testOf(hook)).statusCode, 503, "a failing receiver: 503");
  });

  await t.test("an e-mail channel without SMTP_URL: 409", async (t) => {
    t.notOk(ctx.config.smtpUrl, "no SMTP here");
    const mail = await create(t, ta, alice, {
      type: "email",
      name: "mail",
      settings: { addresses: ["a@a.example"] },
    });
    const res = await testOf(mail);
    t.equal(res.statusCode, 409);
    t.match(res.json().error, { code: "CONFLICT", message: /SMTP_URL is not set/ });
  });

  await t.test("an unreachable provider: 503 naming the host, never the secret", async (t) => {
    const ntfy = await create(t, ta, alice, {
      type: "ntfy",
      name: "nowhere",
      settings: { topic_url: "https://ntfy.invalid/NTFYSECRETTOPIC" },
    });
    const res = await testOf(ntfy);
    t.equal(res.statusCode, 503, res.body);
    t.match(res.json().error.message, /ntfy test send failed: host not found: ntfy\.invalid/);
    t.notOk(res.body.includes("NTFYSECRETTOPIC"));
  });
});

t.test("a test send to loopback needs WEBHOOK_ALLOW_HTTP_LOOPBACK", async (t) => {
  const ta = await testApp(t);
  const w = await seedTenants(ta);
  const res = await call(ta.app, w.keys.alicePersonal, "POST", "/v1/channels", {
    type: "slack",
    name: "local",
    settings: { webhook_url: "http://127.0.0.1:9/services/x" },
  });
  t.equal(res.statusCode, 400);
  t.match(res.json().error.message, /^body\.settings\.webhook_url: .*WEBHOOK_ALLOW_HTTP_LOOPBACK=true/);
});
