import { randomBytes } from "node:crypto";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { z } from "zod";
import {
  type Channel,
  createChannel,
  deleteChannel,
  getChannel,
  listChannels,
  type TestResult,
  testChannel,
  updateChannel,
} from "../../channels/channels.js";
import { CHANNEL_TYPES, type ChannelType } from "../../channels/providers/types.js";
import { ROUTING_KINDS } from "../../channels/routing.js";
import {
  createRule,
  deleteRule,
  getNotificationSettings,
  listRules,
  putNotificationSettings,
} from "../../channels/rules.js";
import { channelBody, channelUpdateBody, ruleBody } from "../../channels/schema.js";
import { listConnections } from "../../connections/list.js";
import type { Actor } from "../../core/actor.js";
import { type AppContext, perApp } from "../../core/context.js";
import { invalidInput, notFound, ServiceError } from "../../core/errors.js";
import { issueMessage } from "../../core/issues.js";
import { keyOrganizationsFor } from "../../identity/key-service.js";
import { fieldErrors, type FormErrors, formList, formOf, statusOfError } from "../forms.js";
import { frameOf } from "../index.js";
import { page } from "../render.js";
import { dashboardActor } from "../session.js";

/**
 * Channels (docs/channels.md): an account's notification channels (list, add, edit, delete, a
 * test send), its routing rules (list, add, delete) and its "e-mail the owners" switch. Every
 * read and write is the core's (src/channels/channels.ts, rules.ts), the functions REST calls.
 *
 * The account: the signed-in user's own, or (`?account=<organization id>`) an organization where
 * the user is admin or owner, the organizations an organization key could be made for. The
 * channel functions take the account from the actor, so such a page acts as the same signed-in
 * user with `actingFor` naming the organization (core/actor.ts); the core checks the user's role
 * in it on every verb.
 *
 * Secret settings are write-only: never echoed back into a form, not even after a refusal; an
 * empty secret field on the edit form keeps the stored one. A webhook channel's signing secret is
 * shown once, in the answer to the add form's POST (no-store, never in a URL), and a resent add
 * form (a one-time `form_id`) creates nothing the second time.
 */

type ChannelField = {
  name: string;
  label: string;
  secret?: boolean;
  optional?: boolean;
  input?: "url" | "text" | "textarea" | "priority";
  hint: string;
};

/** The form fields of each channel type (the keys of its `settings`). */
export const TYPE_FIELDS: Record<ChannelType, ChannelField[]> = {
  slack: [
    {
      name: "webhook_url",
      label: "Webhook URL",
      secret: true,
      input: "url",
      hint: "The Slack incoming webhook URL, https://hooks.slack.com/services/…",
    },
  ],
  teams: [
    {
      name: "webhook_url",
      label: "Webhook URL",
      secret: true,
      input: "url",
      hint: "The URL of a Teams Workflows webhook (“Post to a channel when a webhook request is received”).",
    },
  ],
  discord: [
    {
      name: "webhook_url",
      label: "Webhook URL",
      secret: true,
      input: "url",
      hint: "The channel's webhook URL, https://discord.com/api/webhooks/…",
    },
  ],
  pagerduty: [
    {
      name: "routing_key",
      label: "Routing key",
      secret: true,
      hint: "The 32-character integration key of an Events API v2 integration (Service → Integrations).",
    },
    {
      name: "api_url",
      label: "API URL (optional)",
      optional: true,
      input: "url",
      hint: "Empty: https://events.pagerduty.com.",
    },
  ],
  opsgenie: [
    {
      name: "api_key",
      label: "API key",
      secret: true,
      hint: "The API key (a UUID) of an Opsgenie API integration.",
    },
    {
      name: "api_url",
      label: "API URL (optional)",
      optional: true,
      input: "url",
      hint: "Empty: https://api.opsgenie.com; in the EU https://api.eu.opsgenie.com.",
    },
  ],
  telegram: [
    {
      name: "bot_token",
      label: "Bot token",
      secret: true,
      hint: "The bot's token from @BotFather, like 123456:ABC-DEF…",
    },
    {
      name: "chat_id",
      label: "Chat id",
      hint: "The chat's numeric id (a group's starts with -) or a channel's @name.",
    },
    {
      name: "api_url",
      label: "API URL (optional)",
      optional: true,
      input: "url",
      hint: "Empty: https://api.telegram.org, or your own Bot API server.",
    },
  ],
  ntfy: [
    {
      name: "topic_url",
      label: "Topic URL",
      secret: true,
      input: "url",
      hint: "The topic's URL, https://ntfy.sh/<topic> or on your own server.",
    },
    {
      name: "token",
      label: "Access token (optional)",
      secret: true,
      optional: true,
      hint: "An ntfy access token (tk_…) for a topic with access control.",
    },
    {
      name: "priority",
      label: "Priority (optional)",
      optional: true,
      input: "priority",
      hint: "1 (min) to 5 (max); empty: 4.",
    },
  ],
  email: [
    {
      name: "addresses",
      label: "Addresses",
      input: "textarea",
      hint: "1 to 20 e-mail addresses, separated by commas or new lines.",
    },
  ],
  webhook: [
    {
      name: "url",
      label: "URL",
      secret: true,
      input: "url",
      hint: "The https URL Vigil POSTs signed JSON alerts to (see the webhooks documentation).",
    },
  ],
};

export const TYPE_WORDS: Record<ChannelType, string> = {
  slack: "Slack",
  teams: "Microsoft Teams",
  discord: "Discord",
  pagerduty: "PagerDuty",
  opsgenie: "Opsgenie",
  telegram: "Telegram",
  ntfy: "ntfy",
  email: "E-mail",
  webhook: "Webhook (signed JSON)",
};

/** The order the type select offers them in. */
const TYPE_ORDER: ChannelType[] = [
  "slack",
  "teams",
  "discord",
  "pagerduty",
  "opsgenie",
  "telegram",
  "ntfy",
  "email",
  "webhook",
];

const KIND_WORDS: Record<string, string> = {
  failure: "Failures (availability incidents)",
  missed_heartbeat: "Missed heartbeats",
  anomaly: "Anomalies",
  budget_warning: "Budget warnings",
  slo_burn: "SLO burn rates (error budget spent too fast)",
  audit: "Audits (keys, memberships, credentials)",
};

/** `?notice=` values these pages show after a redirect. */
const NOTICES: Record<string, string> = {
  created: "The channel was added. Send a test to check it.",
  updated: "The channel was saved.",
  deleted: "The channel was deleted.",
  rule_created: "The routing rule was added.",
  rule_deleted: "The routing rule was deleted.",
  settings: "The owners' alert e-mail setting was saved.",
};

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Form ids already used (this process, an hour): a resent add form creates nothing the second time. */
const usedForms = perApp(() => new Map<string, number>());
const FORM_TTL_MS = 3_600_000;
function claimForm(ctx: AppContext, id: string): boolean {
  const used = usedForms(ctx);
  const now = Date.now();
  if (used.size > 10_000) for (const [k, t] of used) if (now - t > FORM_TTL_MS) used.delete(k);
  if (used.has(id)) return false;
  used.set(id, now);
  return true;
}

/**
 * A form through a REST body schema: the first problem as the API words it, as a ServiceError
 * naming the field (`body.name`), so `fieldErrors` puts it next to the field.
 */
function parseBody<S extends z.ZodType>(schema: S, input: Record<string, unknown>): z.output<S> {
  const r = schema.safeParse(input);
  if (r.success) return r.data as z.output<S>;
  const issue = r.error.issues[0];
  if (!issue) throw invalidInput("body", "is invalid");
  const field = ["body", ...issue.path.map(String)].join(".");
  throw new ServiceError("invalid_input", `${field}: ${issueMessage(input, issue)}`, { field });
}

/**
 * Errors by form field: `settings.x` (the verb's `body.settings.x`, the test send's
 * `settings.x`) stays `settings.x`; an array's item (`channel_ids.0`) is the array's field.
 */
function errorsOf(err: unknown): FormErrors {
  const e = fieldErrors(err);
  const fields: Record<string, string> = {};
  for (const [k, v] of Object.entries(e.fields)) fields[k.replace(/\.\d+$/, "")] = v;
  return { fields, form: e.form };
}

const emptyErrors = (): FormErrors => ({ fields: {}, form: null });
const hasErrors = (e: FormErrors) => Boolean(e.form) || Object.keys(e.fields).length > 0;

/** The account a page acts on: the user's own, or an organization the user administers. */
interface AccountContext {
  actor: Actor;
  /** The organization, or null for the user's own account. */
  organization: { id: string; name: string; role: string } | null;
  /** Every account the user may manage here, for the switch. */
  accounts: { id: string; name: string }[];
  /** `?account=…` to append to this account's links (empty for the user's own). */
  query: string;
}

async function accountOf(ctx: AppContext, req: FastifyRequest): Promise<AccountContext> {
  const user = dashboardActor(req);
  const raw = (req.query as Record<string, unknown> | undefined)?.account;
  const wanted = typeof raw === "string" ? raw : "";
  const orgs = await keyOrganizationsFor(ctx, user);
  const accounts = [{ id: "", name: "Personal" }, ...orgs.map((o) => ({ id: o.id, name: o.name }))];
  if (wanted === "" || wanted === "personal") return { actor: user, organization: null, accounts, query: "" };
  const org = orgs.find((o) => o.id === wanted);
  // not a member, a member without the admin or owner role, or no such organization: not found
  if (!org) throw notFound("Organization not found among those you administer");
  return {
    // the organization's alerting: the core checks the user's role in it on every verb
    actor: { ...user, actingFor: org.id },
    organization: { id: org.id, name: org.name, role: org.role },
    accounts,
    query: `account=${encodeURIComponent(org.id)}`,
  };
}

/** The page's path with the account (and more query) kept. */
const withAccount = (path: string, a: AccountContext, more = "") => {
  const q = [a.query, more].filter(Boolean).join("&");
  return q ? `${path}?${q}` : path;
};

/** The add form as typed (never a secret). */
interface ChannelForm {
  type: ChannelType;
  name: string;
  /** Non-secret settings by `<type>.<field>`. */
  values: Record<string, string>;
}

const typeOf = (v: unknown): ChannelType | null =>
  typeof v === "string" && (CHANNEL_TYPES as readonly string[]).includes(v) ? (v as ChannelType) : null;

/** The settings object of a type from the form (`<prefix><field>` inputs), empty optional or kept fields left out. */
function settingsFromForm(
  type: ChannelType,
  f: Record<string, string>,
  prefix: string,
  mode: "create" | "edit",
): Record<string, unknown> {
  const settings: Record<string, unknown> = {};
  for (const field of TYPE_FIELDS[type]) {
    const raw = f[`${prefix}${field.name}`] ?? "";
    const v = raw.trim();
    if (field.input === "textarea") {
      settings[field.name] = v
        .split(/[\n,;]+/)
        .map((s) => s.trim())
        .filter(Boolean);
      continue;
    }
    // empty: optional left out, a stored secret kept (edit); required ones are named by the core
    if (v === "" && (field.optional || (mode === "edit" && field.secret))) continue;
    if (field.input === "priority") settings[field.name] = /^-?\d+$/.test(v) ? Number(v) : v;
    else settings[field.name] = v;
  }
  return settings;
}

/** The non-secret values of the form, to show again after a refusal. */
function echoValues(type: ChannelType, f: Record<string, string>, prefix: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const field of TYPE_FIELDS[type])
    if (!field.secret) out[field.name] = (f[`${prefix}${field.name}`] ?? "").slice(0, 2100);
  return out;
}

/** A stored channel's non-secret settings as form values. */
function valuesOf(c: Channel): Record<string, string> {
  const out: Record<string, string> = {};
  for (const field of TYPE_FIELDS[c.type]) {
    if (field.secret) continue;
    const v = c.settings[field.name];
    out[field.name] = Array.isArray(v)
      ? v.map(String).join("\n")
      : v === undefined || v === null
        ? ""
        : String(v);
  }
  return out;
}

/** The rule form as typed. */
interface RuleForm {
  channel_ids: string[];
  kinds: string[];
  connection_ids: string[];
  send_recoveries: boolean;
  escalate_after_minutes: string;
  repeat_every_minutes: string;
  escalation_channel_ids: string[];
}

const emptyRuleForm = (): RuleForm => ({
  channel_ids: [],
  kinds: [],
  connection_ids: [],
  send_recoveries: true,
  escalate_after_minutes: "",
  repeat_every_minutes: "",
  escalation_channel_ids: [],
});

const minutes = (v: string): number | string | null => {
  const s = v.trim();
  if (s === "") return null;
  return /^-?\d+(\.\d+)?$/.test(s) ? Number(s) : s;
};

type ListState = {
  form?: ChannelForm;
  errors?: FormErrors;
  ruleForm?: RuleForm;
  ruleErrors?: FormErrors;
  settingsError?: string | null;
  /** A refusal about the list itself (deleting a channel a rule names). */
  listError?: string | null;
  test?: {
    channel: string;
    type: string;
    ok: boolean;
    sent: TestResult["sent"];
    error: string | null;
  } | null;
  status?: number;
};

export async function registerChannelPages(scope: FastifyInstance, ctx: AppContext): Promise<void> {
  const listPage = async (req: FastifyRequest, reply: FastifyReply, a: AccountContext, s: ListState = {}) => {
    const [{ channels }, { routing_rules: rules }, settings, connections] = await Promise.all([
      listChannels(ctx, a.actor),
      listRules(ctx, a.actor),
      getNotificationSettings(ctx, a.actor),
      listConnections(ctx, a.actor, {
        organizationId: a.organization ? a.organization.id : "personal",
        limit: 200,
        offset: 0,
      }),
    ]);
    const names = new Map(channels.map((c) => [c.id, c.name]));
    const connNames = new Map(connections.rows.map((c) => [c.id, c.service_name]));
    const failed = hasErrors(s.errors ?? emptyErrors()) || hasErrors(s.ruleErrors ?? emptyErrors());
    const notice = failed || s.test || s.listError || s.settingsError ? null : NOTICES[noticeOf(req)];
    return page(
      reply,
      "channels/index",
      {
        frame: frameOf(req, reply, notice ?? null),
        account: a,
        accountHref: (path: string, more?: string) => withAccount(path, a, more),
        channels,
        rules: rules.map((r) => ({
          ...r,
          channelNames: r.channel_ids.map((id) => names.get(id) ?? id),
          escalationNames: r.escalation_channel_ids.map((id) => names.get(id) ?? id),
          connectionNames: r.connection_ids?.map((id) => connNames.get(id) ?? id) ?? null,
        })),
        emailOwners: settings.email_owners,
        connections: connections.rows.map((c) => ({ id: c.id, name: c.service_name })),
        types: TYPE_ORDER,
        typeWords: TYPE_WORDS,
        typeFields: TYPE_FIELDS,
        kinds: ROUTING_KINDS,
        kindWords: KIND_WORDS,
        form: s.form ?? { type: "slack", name: "", values: {} },
        errors: s.errors ?? emptyErrors(),
        ruleForm: s.ruleForm ?? emptyRuleForm(),
        ruleErrors: s.ruleErrors ?? emptyErrors(),
        settingsError: s.settingsError ?? null,
        listError: s.listError ?? null,
        test: s.test ?? null,
        formId: randomBytes(12).toString("base64url"),
      },
      s.status ?? 200,
    );
  };

  const noticeOf = (req: FastifyRequest) =>
    String((req.query as Record<string, unknown> | undefined)?.notice ?? "");

  const back = (reply: FastifyReply, a: AccountContext, notice: string) =>
    reply
      .code(303)
      .header("location", withAccount("/channels", a, `notice=${notice}`))
      .send();

  /** The account's channel of a page: 404 for a malformed, unknown or foreign id. */
  const channelOf = async (a: AccountContext, id: string) => {
    if (!UUID.test(id)) throw notFound("Channel not found");
    return getChannel(ctx, a.actor, id.toLowerCase());
  };

  // ---- the list, add --------------------------------------------------------------------
  scope.get("/channels", async (req, reply) => listPage(req, reply, await accountOf(ctx, req)));

  scope.post("/channels", { preHandler: scope.csrfProtection }, async (req, reply) => {
    const a = await accountOf(ctx, req);
    const f = formOf(req);
    const type = typeOf(f.type);
    const form: ChannelForm = {
      type: type ?? "slack",
      name: (f.name ?? "").slice(0, 1000),
      values: type ? echoValues(type, f, `${type}.`) : {},
    };
    const formId = f.form_id ?? "";
    if (!/^[A-Za-z0-9_-]{16}$/.test(formId))
      return listPage(req, reply, a, {
        form,
        errors: { fields: {}, form: "The form could not be read; nothing was added. Reload the page." },
        status: 400,
      });
    let created: Awaited<ReturnType<typeof createChannel>>;
    try {
      const body = parseBody(channelBody, {
        type: f.type ?? "",
        name: f.name ?? "",
        settings: type ? settingsFromForm(type, f, `${type}.`, "create") : {},
      });
      if (!claimForm(ctx, formId))
        return listPage(req, reply, a, {
          errors: {
            fields: {},
            form: "This form was already sent: the channel was added then (it is in the list) and was not added twice.",
          },
          status: 409,
        });
      created = await createChannel(ctx, a.actor, body);
    } catch (err) {
      if (!(err instanceof ServiceError)) throw err;
      usedForms(ctx).delete(formId);
      return listPage(req, reply, a, { form, errors: errorsOf(err), status: statusOfError(err) });
    }
    if (created.signing_secret)
      // a webhook channel's signing secret, shown once in this answer (no-store, never in a URL)
      return page(
        reply,
        "channels/created",
        {
          frame: frameOf(req, reply),
          channel: created,
          secret: created.signing_secret,
          listHref: withAccount("/channels", a),
        },
        201,
      );
    return back(reply, a, "created");
  });

  // ---- edit ------------------------------------------------------------------------------
  const editPage = async (
    req: FastifyRequest,
    reply: FastifyReply,
    a: AccountContext,
    c: Channel,
    s: { name?: string; values?: Record<string, string>; errors?: FormErrors; status?: number } = {},
  ) =>
    page(
      reply,
      "channels/edit",
      {
        frame: frameOf(req, reply),
        account: a,
        accountHref: (path: string, more?: string) => withAccount(path, a, more),
        channel: c,
        typeWords: TYPE_WORDS,
        fields: TYPE_FIELDS[c.type],
        name: s.name ?? c.name,
        values: s.values ?? valuesOf(c),
        errors: s.errors ?? emptyErrors(),
      },
      s.status ?? 200,
    );

  scope.get<{ Params: { id: string } }>("/channels/:id/edit", async (req, reply) => {
    const a = await accountOf(ctx, req);
    return editPage(req, reply, a, await channelOf(a, req.params.id));
  });

  scope.post<{ Params: { id: string } }>(
    "/channels/:id/edit",
    { preHandler: scope.csrfProtection },
    async (req, reply) => {
      const a = await accountOf(ctx, req);
      const c = await channelOf(a, req.params.id);
      const f = formOf(req);
      const name = (f.name ?? "").slice(0, 1000);
      try {
        const body = parseBody(channelUpdateBody, {
          name: f.name ?? "",
          settings: settingsFromForm(c.type, f, "settings.", "edit"),
        });
        await updateChannel(ctx, a.actor, c.id, body);
      } catch (err) {
        if (!(err instanceof ServiceError) || err.code === "not_found") throw err;
        return editPage(req, reply, a, c, {
          name,
          values: echoValues(c.type, f, "settings."),
          errors: errorsOf(err),
          status: statusOfError(err),
        });
      }
      return back(reply, a, "updated");
    },
  );

  // ---- delete ----------------------------------------------------------------------------
  scope.post<{ Params: { id: string } }>(
    "/channels/:id/delete",
    { preHandler: scope.csrfProtection },
    async (req, reply) => {
      const a = await accountOf(ctx, req);
      const c = await channelOf(a, req.params.id);
      try {
        await deleteChannel(ctx, a.actor, c.id);
      } catch (err) {
        // named by a routing rule (409): said on the list, above the channels
        if (!(err instanceof ServiceError) || err.code === "not_found") throw err;
        return listPage(req, reply, a, { listError: err.message, status: statusOfError(err) });
      }
      return back(reply, a, "deleted");
    },
  );

  // ---- test ------------------------------------------------------------------------------
  scope.post<{ Params: { id: string } }>(
    "/channels/:id/test",
    { preHandler: scope.csrfProtection },
    async (req, reply) => {
      const a = await accountOf(ctx, req);
      const c = await channelOf(a, req.params.id);
      try {
        const r = await testChannel(ctx, a.actor, c.id);
        return listPage(req, reply, a, {
          test: { channel: c.name, type: c.type, ok: true, sent: r.sent, error: null },
        });
      } catch (err) {
        if (!(err instanceof ServiceError) || err.code === "not_found") throw err;
        const e = errorsOf(err);
        // a credential the provider refused: the edit form, the message next to that setting
        if (Object.keys(e.fields).some((k) => k.startsWith("settings.")))
          return editPage(req, reply, a, c, {
            errors: {
              fields: e.fields,
              form: `The test send was refused: correct the setting marked below. Nothing was changed.`,
            },
            status: statusOfError(err),
          });
        const details = err.details as { status?: number | null; answer?: string } | undefined;
        return listPage(req, reply, a, {
          test: {
            channel: c.name,
            type: c.type,
            ok: false,
            sent:
              details && "answer" in details
                ? [{ event: "", status: details.status ?? null, answer: String(details.answer ?? "") }]
                : [],
            error: err.message,
          },
          status: statusOfError(err),
        });
      }
    },
  );

  // ---- routing rules ---------------------------------------------------------------------
  scope.post("/channels/rules", { preHandler: scope.csrfProtection }, async (req, reply) => {
    const a = await accountOf(ctx, req);
    const f = formOf(req);
    const ruleForm: RuleForm = {
      channel_ids: formList(req, "channel_ids"),
      kinds: formList(req, "kinds"),
      connection_ids: formList(req, "connection_ids"),
      send_recoveries: f.send_recoveries === "on" || f.send_recoveries === "true",
      escalate_after_minutes: (f.escalate_after_minutes ?? "").slice(0, 100),
      repeat_every_minutes: (f.repeat_every_minutes ?? "").slice(0, 100),
      escalation_channel_ids: formList(req, "escalation_channel_ids"),
    };
    try {
      const body = parseBody(ruleBody, {
        channel_ids: ruleForm.channel_ids,
        kinds: ruleForm.kinds.length ? ruleForm.kinds : null,
        connection_ids: ruleForm.connection_ids.length ? ruleForm.connection_ids : null,
        send_recoveries: ruleForm.send_recoveries,
        escalate_after_minutes: minutes(ruleForm.escalate_after_minutes),
        repeat_every_minutes: minutes(ruleForm.repeat_every_minutes),
        escalation_channel_ids: ruleForm.escalation_channel_ids,
      });
      await createRule(ctx, a.actor, body);
    } catch (err) {
      if (!(err instanceof ServiceError)) throw err;
      return listPage(req, reply, a, { ruleForm, ruleErrors: errorsOf(err), status: statusOfError(err) });
    }
    return back(reply, a, "rule_created");
  });

  scope.post<{ Params: { id: string } }>(
    "/channels/rules/:id/delete",
    { preHandler: scope.csrfProtection },
    async (req, reply) => {
      const a = await accountOf(ctx, req);
      if (!UUID.test(req.params.id)) throw notFound("Routing rule not found");
      await deleteRule(ctx, a.actor, req.params.id.toLowerCase());
      return back(reply, a, "rule_deleted");
    },
  );

  // ---- the owners' e-mail ----------------------------------------------------------------
  scope.post("/channels/settings", { preHandler: scope.csrfProtection }, async (req, reply) => {
    const a = await accountOf(ctx, req);
    const f = formOf(req);
    try {
      await putNotificationSettings(ctx, a.actor, { email_owners: f.email_owners === "on" });
    } catch (err) {
      if (!(err instanceof ServiceError)) throw err;
      return listPage(req, reply, a, { settingsError: err.message, status: statusOfError(err) });
    }
    return back(reply, a, "settings");
  });
}
