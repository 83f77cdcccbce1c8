import {
  createChannel,
  deleteChannel,
  getChannel,
  listChannels,
  MAX_CHANNELS_PER_ACCOUNT,
  testChannel,
  updateChannel,
} from "../../channels/channels.js";
import { CHANNEL_TYPES } from "../../channels/providers/types.js";
import { ROUTING_KINDS } from "../../channels/routing.js";
import {
  createRule,
  deleteRule,
  getNotificationSettings,
  getRule,
  listRules,
  putNotificationSettings,
  updateRule,
} from "../../channels/rules.js";
import {
  channelBody,
  channelUpdateBody,
  idParams,
  notificationSettingsBody,
  ruleBody,
} from "../../channels/schema.js";
import {
  channel,
  channelDeleted,
  channelList,
  channelTest,
  createdChannel,
  notificationSettings,
  routingRule,
  routingRuleDeleted,
  routingRuleList,
} from "../responses/channels.js";
import { envelopeError } from "../responses/errors.js";
import { defineRoute } from "../route.js";

/**
 * Notification channels, routing rules and the account's e-mail switch (docs/channels.md). The
 * account is a personal key's user or an organization key's organization; changing an
 * organization's needs its admin or owner role. The envelope error body, as /v1/webhooks.
 */
const tag = "Channels";
const account =
  "The account is a personal key's user or an organization key's organization; changing an organization's " +
  "needs the admin or owner role.";

export const channelRoutes = [
  defineRoute({
    tag,
    errorStyle: "envelope",
    method: "POST",
    path: "/v1/channels",
    summary:
      "Add a notification channel (Slack, Teams, Discord, PagerDuty, Opsgenie, Telegram, ntfy, e-mail, webhook)",
    description:
      `Body: {"type", "name", "settings"}; type one of ${CHANNEL_TYPES.join(", ")}. ${account} Settings are checked ` +
      "per type (400 naming body.settings.<field>); URLs must pass the outbound rules of webhooks. Secret settings " +
      "(webhook URLs, routing keys, API keys, tokens, ntfy topic URLs) are stored encrypted and never answered, not " +
      `even here: a hint names the channel. A webhook channel's signing secret is answered only here. At most ${MAX_CHANNELS_PER_ACCOUNT} per account (409).`,
    auth: "connections:write",
    body: channelBody,
    status: 201,
    responses: { 201: createdChannel, 409: envelopeError },
    handler: ({ ctx, actor, body }) => createChannel(ctx, actor, body),
  }),
  defineRoute({
    tag,
    errorStyle: "envelope",
    method: "GET",
    path: "/v1/channels",
    summary: "The account's notification channels (never their secrets)",
    auth: "connections:read",
    status: 200,
    responses: { 200: channelList },
    handler: ({ ctx, actor }) => listChannels(ctx, actor),
  }),
  defineRoute({
    tag,
    errorStyle: "envelope",
    method: "GET",
    path: "/v1/channels/:id",
    summary: "One notification channel",
    description: "404 when the account has no such channel (another account's is not found either).",
    auth: "connections:read",
    params: idParams,
    status: 200,
    responses: { 200: channel },
    handler: ({ ctx, actor, params }) => getChannel(ctx, actor, params.id),
  }),
  defineRoute({
    tag,
    errorStyle: "envelope",
    method: "PUT",
    path: "/v1/channels/:id",
    summary: "Change a channel's name or settings",
    description:
      `Body: {"name"?, "settings"?}. The settings sent are merged over the stored ones (a secret left out is kept) and ` +
      `checked again; the type cannot change (400 naming body.type). ${account}`,
    auth: "connections:write",
    params: idParams,
    body: channelUpdateBody,
    status: 200,
    responses: { 200: channel },
    handler: ({ ctx, actor, params, body }) => updateChannel(ctx, actor, params.id, body),
  }),
  defineRoute({
    tag,
    errorStyle: "envelope",
    method: "DELETE",
    path: "/v1/channels/:id",
    summary: "Remove a channel",
    description:
      "Its alerts not delivered yet are given up. A channel a routing rule names cannot be removed: 409 naming the rules.",
    auth: "connections:write",
    params: idParams,
    status: 200,
    responses: { 200: channelDeleted, 409: envelopeError },
    handler: ({ ctx, actor, params }) => deleteChannel(ctx, actor, params.id),
  }),
  defineRoute({
    tag,
    errorStyle: "envelope",
    method: "POST",
    path: "/v1/channels/:id/test",
    summary: "Send a test alert now and report the provider's answer",
    description:
      "A paging provider (PagerDuty, Opsgenie) gets a test alert that is resolved at once. A credential the provider " +
      "refuses is a 400 naming it (settings.routing_key, settings.bot_token, …); a provider that fails otherwise a 503 " +
      "with its answer. An e-mail channel's test needs SMTP_URL (409 without it).",
    auth: "connections:write",
    params: idParams,
    status: 200,
    responses: { 200: channelTest, 409: envelopeError, 503: envelopeError },
    handler: ({ ctx, actor, params }) => testChannel(ctx, actor, params.id),
  }),
  defineRoute({
    tag,
    errorStyle: "envelope",
    method: "POST",
    path: "/v1/routing-rules",
    summary: "Add a routing rule: which channels get which alerts, and escalation",
    description:
      `Body: {"channel_ids", "kinds" (among ${ROUTING_KINDS.join(", ")}; null: all), "connection_ids" (null: all), ` +
      '"send_recoveries" (default true), "escalate_after_minutes" (1–1440 or null), "repeat_every_minutes" (1–1440 or ' +
      'null), "escalation_channel_ids"}. Without rules every alert goes to every channel (audits to paging providers ' +
      "only through a rule); once rules exist, an alert no rule matches goes to e-mail only. " +
      account,
    auth: "connections:write",
    body: ruleBody,
    status: 201,
    responses: { 201: routingRule, 409: envelopeError },
    handler: ({ ctx, actor, body }) => createRule(ctx, actor, body),
  }),
  defineRoute({
    tag,
    errorStyle: "envelope",
    method: "GET",
    path: "/v1/routing-rules",
    summary: "The account's routing rules",
    auth: "connections:read",
    status: 200,
    responses: { 200: routingRuleList },
    handler: ({ ctx, actor }) => listRules(ctx, actor),
  }),
  defineRoute({
    tag,
    errorStyle: "envelope",
    method: "GET",
    path: "/v1/routing-rules/:id",
    summary: "One routing rule",
    auth: "connections:read",
    params: idParams,
    status: 200,
    responses: { 200: routingRule },
    handler: ({ ctx, actor, params }) => getRule(ctx, actor, params.id),
  }),
  defineRoute({
    tag,
    errorStyle: "envelope",
    method: "PUT",
    path: "/v1/routing-rules/:id",
    summary: "Replace a routing rule",
    description: "The same body as POST; fields left out take their defaults.",
    auth: "connections:write",
    params: idParams,
    body: ruleBody,
    status: 200,
    responses: { 200: routingRule },
    handler: ({ ctx, actor, params, body }) => updateRule(ctx, actor, params.id, body),
  }),
  defineRoute({
    tag,
    errorStyle: "envelope",
    method: "DELETE",
    path: "/v1/routing-rules/:id",
    summary: "Remove a routing rule",
    auth: "connections:write",
    params: idParams,
    status: 200,
    responses: { 200: routingRuleDeleted },
    handler: ({ ctx, actor, params }) => deleteRule(ctx, actor, params.id),
  }),
  defineRoute({
    tag,
    errorStyle: "envelope",
    method: "GET",
    path: "/v1/notification-settings",
    summary: "Whether the account's owners get every alert by e-mail",
    auth: "connections:read",
    status: 200,
    responses: { 200: notificationSettings },
    handler: ({ ctx, actor }) => getNotificationSettings(ctx, actor),
  }),
  defineRoute({
    tag,
    errorStyle: "envelope",
    method: "PUT",
    path: "/v1/notification-settings",
    summary: "Turn the owners' alert e-mail on or off",
    description: `Body: {"email_owners": true|false}. On by default. ${account}`,
    auth: "connections:write",
    body: notificationSettingsBody,
    status: 200,
    responses: { 200: notificationSettings },
    handler: ({ ctx, actor, body }) => putNotificationSettings(ctx, actor, body),
  }),
];
