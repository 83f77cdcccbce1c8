import { randomUUID } from "node:crypto";
import type { z } from "zod";
import type { Actor } from "../core/actor.js";
import type { AppContext } from "../core/context.js";
import { conflict, invalidInput, notFound, ServiceError } from "../core/errors.js";
import { recordDelivery } from "../incidents/incidents.js";
import { type AlertAccount, managedAccount, readableAccount } from "../notifications/account.js";
import type { NotificationKind } from "../notifications/repository.js";
import { newSecret } from "../webhooks/payload.js";
import { checkWebhookUrl, rulesOf, urlHint } from "../webhooks/url.js";
import { linksOf } from "./alert.js";
import { providerOf } from "./providers/index.js";
import type { ChannelAlert, ChannelType, Provider } from "./providers/types.js";
import {
  type ChannelRow,
  countAccountChannels,
  deleteChannelRow,
  giveUpPendingOfChannel,
  insertChannel,
  rulesNamingChannel,
  selectAccountChannel,
  selectAccountChannels,
  updateChannelRow,
} from "./repository.js";
import {
  type ChannelBody,
  type ChannelUpdateBody,
  emailSettings,
  parseSettings,
  webhookSettings,
} from "./schema.js";
import { sendThrough } from "./send.js";

/**
 * Notification channels (docs/channels.md): per account (a personal key's user or an
 * organization key's organization, as webhooks), each a type and its settings. Secret settings
 * are stored encrypted and never answered, not even at creation: a hint names the channel. A
 * webhook channel's signing secret is answered once, at creation. Changing an organization's
 * channels needs its admin or owner role.
 */

export const MAX_CHANNELS_PER_ACCOUNT = 50;
const WHAT = "notification channels";

/** A type's settings: its schema, which fields are secret, which are URLs Vigil connects to. */
interface TypeSpec {
  schema: z.ZodType<Record<string, unknown>>;
  secretFields: readonly string[];
  urlFields: readonly string[];
  hint(settings: Record<string, unknown>): string;
  provider: Provider | null;
}

function specOf(type: ChannelType): TypeSpec {
  if (type === "email")
    return {
      schema: emailSettings,
      secretFields: [],
      urlFields: [],
      hint: (s) => {
        const a = s.addresses as string[];
        return a.length === 1 ? String(a[0]) : `${String(a[0])} and ${a.length - 1} more`;
      },
      provider: null,
    };
  if (type === "webhook")
    return {
      schema: webhookSettings,
      secretFields: ["url"],
      urlFields: ["url"],
      hint: (s) => urlHint(new URL(String(s.url))),
      provider: null,
    };
  const p = providerOf(type) as Provider;
  return {
    schema: p.settings,
    secretFields: p.secretFields,
    urlFields: p.urlFields,
    hint: p.hint,
    provider: p,
  };
}

/** A channel as answered: its settings without the secret ones, which are only named. */
export interface Channel {
  id: string;
  type: ChannelType;
  name: string;
  settings: Record<string, unknown>;
  /** The secret settings stored (never their values). */
  secret_settings: string[];
  hint: string;
  organization_id: string | null;
  created_at: string;
  updated_at: string;
}

const shown = (r: ChannelRow, secretFields: readonly string[]): Channel => ({
  id: r.id,
  type: r.type,
  name: r.name,
  settings: r.settings,
  secret_settings: [...secretFields],
  hint: r.hint,
  organization_id: r.organization_id,
  created_at: new Date(r.created_at).toISOString(),
  updated_at: new Date(r.updated_at).toISOString(),
});

/** Validated settings split into what is stored plain and what is stored encrypted. */
function prepare(
  ctx: AppContext,
  type: ChannelType,
  raw: unknown,
): {
  plain: Record<string, unknown>;
  secrets: Record<string, unknown>;
  hint: string;
  all: Record<string, unknown>;
} {
  const spec = specOf(type);
  const all = parseSettings(spec.schema, raw ?? {}, type);
  for (const f of spec.urlFields) {
    const v = all[f];
    if (typeof v === "string") {
      const href = checkWebhookUrl(v, rulesOf(ctx.config), `body.settings.${f}`).href;
      // kept as written when the parser only added the root's slash (`https://api.eu.opsgenie.com`)
      all[f] = href === `${v}/` ? v : href;
    }
  }
  const plain: Record<string, unknown> = {};
  const secrets: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(all)) (spec.secretFields.includes(k) ? secrets : plain)[k] = v;
  return { plain, secrets, hint: spec.hint(all), all };
}

const sealed = (ctx: AppContext, secrets: Record<string, unknown>) =>
  Object.keys(secrets).length > 0 ? ctx.credentials.encrypt(JSON.stringify(secrets)) : null;

/** A stored channel's whole settings (plain and decrypted secrets). */
export function settingsOf(ctx: AppContext, r: ChannelRow): Record<string, unknown> {
  const secrets = r.secrets_enc
    ? (JSON.parse(ctx.credentials.decrypt(r.secrets_enc)) as Record<string, unknown>)
    : {};
  return { ...r.settings, ...secrets };
}

/** POST /v1/channels. */
export async function createChannel(
  ctx: AppContext,
  actor: Actor,
  body: ChannelBody,
): Promise<Channel & { signing_secret?: string }> {
  const account = await managedAccount(ctx, actor, WHAT);
  const { plain, secrets, hint } = prepare(ctx, body.type, body.settings);
  const id = randomUUID();
  const at = ctx.now();
  const signing = body.type === "webhook" ? newSecret() : null;
  const row: ChannelRow = {
    id,
    user_id: account.scope === "user" ? account.id : null,
    organization_id: account.scope === "organization" ? account.id : null,
    type: body.type,
    name: body.name,
    settings: plain,
    secrets_enc: sealed(ctx, secrets),
    hint,
    signing_secret_enc: signing ? ctx.credentials.encrypt(signing) : null,
    created_at: at,
    updated_at: at,
  };
  await ctx.stores.db.transaction(async (tx) => {
    const n = await countAccountChannels(tx, account);
    if (n >= MAX_CHANNELS_PER_ACCOUNT)
      throw conflict(
        `An account has at most ${MAX_CHANNELS_PER_ACCOUNT} channels and this one has ${n}; delete one (DELETE /v1/channels/{id}) first`,
      );
    await insertChannel(tx, {
      id,
      account,
      type: row.type,
      name: row.name,
      settings: plain,
      secretsEnc: row.secrets_enc,
      hint,
      signingSecretEnc: row.signing_secret_enc,
      at,
    });
  });
  const out = shown(row, Object.keys(secrets));
  return signing ? { ...out, signing_secret: signing } : out;
}

const secretNames = (ctx: AppContext, r: ChannelRow) => {
  try {
    return Object.keys(settingsOf(ctx, r)).filter((k) => !(k in r.settings));
  } catch {
    return specOf(r.type).secretFields.slice();
  }
};

/** GET /v1/channels: the account's channels, oldest first. */
export async function listChannels(ctx: AppContext, actor: Actor): Promise<{ channels: Channel[] }> {
  const rows = await selectAccountChannels(ctx.stores.db, await readableAccount(ctx, actor, WHAT));
  return { channels: rows.map((r) => shown(r, secretNames(ctx, r))) };
}

/** GET /v1/channels/{id}. Another account's channel, like an absent one, is not found. */
export async function getChannel(ctx: AppContext, actor: Actor, id: string): Promise<Channel> {
  const r = await selectAccountChannel(ctx.stores.db, await readableAccount(ctx, actor, WHAT), id);
  if (!r) throw notFound(`Channel ${id} not found`);
  return shown(r, secretNames(ctx, r));
}

/**
 * PUT /v1/channels/{id}: changes the fields sent. Settings sent are merged over the stored ones
 * (a secret left out is kept), and the whole is validated again; the type cannot change.
 */
export async function updateChannel(
  ctx: AppContext,
  actor: Actor,
  id: string,
  body: ChannelUpdateBody,
): Promise<Channel> {
  const account = await managedAccount(ctx, actor, WHAT);
  let out: Channel | null = null;
  await ctx.stores.db.transaction(async (tx) => {
    const r = await selectAccountChannel(tx, account, id, true);
    if (!r) throw notFound(`Channel ${id} not found`);
    if (body.type !== undefined && body.type !== r.type)
      throw invalidInput(
        "body.type",
        `cannot change (the channel is ${r.type}); create a ${body.type} channel and delete this one`,
      );
    let settings = r.settings;
    let secretsEnc = r.secrets_enc;
    let hint = r.hint;
    let secrets: string[] = secretNames(ctx, r);
    if (body.settings !== undefined) {
      // null removes an optional setting (an ntfy token, an api_url back to the default)
      const merged: Record<string, unknown> = { ...settingsOf(ctx, r), ...body.settings };
      for (const [k, v] of Object.entries(body.settings)) if (v === null) delete merged[k];
      const p = prepare(ctx, r.type, merged);
      settings = p.plain;
      secretsEnc = sealed(ctx, p.secrets);
      hint = p.hint;
      secrets = Object.keys(p.secrets);
    }
    const at = ctx.now();
    const name = body.name ?? r.name;
    await updateChannelRow(tx, { id, name, settings, secretsEnc, hint, at });
    out = shown({ ...r, name, settings, secrets_enc: secretsEnc, hint, updated_at: at }, secrets);
  });
  return out as unknown as Channel;
}

const DELETED = "not sent: the channel was deleted";

/**
 * DELETE /v1/channels/{id}: its alerts not delivered yet are given up (each incident's timeline
 * says so). A channel a routing rule names cannot be deleted (409 naming the rules).
 */
export async function deleteChannel(
  ctx: AppContext,
  actor: Actor,
  id: string,
): Promise<{ id: string; deleted: true }> {
  const account = await managedAccount(ctx, actor, WHAT);
  const at = ctx.now();
  await ctx.stores.db.transaction(async (tx) => {
    if (!(await selectAccountChannel(tx, account, id, true))) throw notFound(`Channel ${id} not found`);
    const rules = await rulesNamingChannel(tx, account, id);
    if (rules.length > 0)
      throw conflict(
        `Channel ${id} is named by routing rule${rules.length > 1 ? "s" : ""} ${rules.join(", ")}; change or delete ${rules.length > 1 ? "them" : "it"} first`,
      );
    for (const n of await giveUpPendingOfChannel(tx, id, DELETED))
      if (n.incident_id)
        await recordDelivery(tx, {
          incidentId: n.incident_id,
          notificationId: n.id,
          kind: n.kind as NotificationKind,
          channel: n.channel,
          recipient: n.recipient,
          attempt: n.attempts,
          outcome: "given_up",
          error: DELETED,
          at,
        });
    await deleteChannelRow(tx, id);
  });
  return { id, deleted: true };
}

/** The answer to a test send. */
export interface TestResult {
  id: string;
  type: ChannelType;
  ok: true;
  /** Each request sent (a paging provider: the test alert, then its resolve), with the provider's answer. */
  sent: { event: string; status: number | null; answer: string }[];
}

/**
 * POST /v1/channels/{id}/test: sends a test alert now, outside the outbox, and reports the
 * provider's answer. A paging provider gets a test alert resolved at once. A refused credential
 * is a 400 naming the setting; another failure a 502-like `unavailable` naming the answer. An
 * e-mail channel's test goes through the mailer (409 when SMTP_URL is not set); a webhook
 * channel's test is a signed POST as deliveries are.
 */
export async function testChannel(ctx: AppContext, actor: Actor, id: string): Promise<TestResult> {
  const account: AlertAccount = await managedAccount(ctx, actor, WHAT);
  const r = await selectAccountChannel(ctx.stores.db, account, id);
  if (!r) throw notFound(`Channel ${id} not found`);
  const settings = settingsOf(ctx, r);
  const at = ctx.now();
  const testId = randomUUID();
  const alert: ChannelAlert = {
    id: testId,
    kind: "test",
    event: "trigger",
    severity: "info",
    subject: `[Vigil] Test of channel ${r.name}`,
    body: `This is a test alert sent from Vigil at ${at.toISOString()} to check the channel "${r.name}". Nothing is wrong.`,
    connectionId: null,
    connectionName: null,
    incidentId: null,
    incidentKind: null,
    createdAt: at,
    links: linksOf(ctx.config.publicUrl, null, null),
  };
  const spec = specOf(r.type);
  const sent: TestResult["sent"] = [];
  if (r.type === "email" || r.type === "webhook") {
    const { testPlainChannel } = await import("./plain.js");
    sent.push(await testPlainChannel(ctx, r, settings, alert));
    return { id, type: r.type, ok: true, sent };
  }
  const provider = spec.provider as Provider;
  const events =
    r.type === "pagerduty" || r.type === "opsgenie" ? (["trigger", "resolve"] as const) : (["info"] as const);
  for (const event of events) {
    const result = await sendThrough(ctx, provider, settings, { ...alert, event });
    if (result.error !== null) {
      if (result.refusedField)
        throw invalidInput(`settings.${result.refusedField}`, `${r.type} refused it: ${result.error}`);
      throw new ServiceError("unavailable", `The ${r.type} test send failed: ${result.error}`, {
        details: { status: result.status, answer: result.answer, event },
        reason: "provider_failed",
      });
    }
    sent.push({ event, status: result.status, answer: result.answer });
  }
  return { id, type: r.type, ok: true, sent };
}
