import { z } from "zod";
import { invalidInput } from "../core/errors.js";
import { issueMessage } from "../core/issues.js";
import { MAX_URL_LENGTH } from "../webhooks/url.js";
import { CHANNEL_TYPES, type ChannelType } from "./providers/types.js";
import { ROUTING_KINDS } from "./routing.js";

/** Request bodies and settings of /v1/channels, /v1/routing-rules and /v1/notification-settings. */

export const MAX_CHANNEL_NAME = 100;
export const MAX_EMAIL_ADDRESSES = 20;

const name = z
  .string({ error: "must be a string" })
  .trim()
  .min(1, { error: "must not be empty" })
  .max(MAX_CHANNEL_NAME, { error: `must be at most ${MAX_CHANNEL_NAME} characters` });

/** POST /v1/channels. `settings` is checked against the type's own schema by the verb. */
export const channelBody = z.strictObject({
  type: z.enum(CHANNEL_TYPES, { error: `must be one of ${CHANNEL_TYPES.join(", ")}` }),
  name,
  settings: z
    .record(z.string(), z.unknown(), { error: "must be an object of the type's settings" })
    .describe(
      "per type: email {addresses}, webhook {url}, slack/teams/discord {webhook_url}, pagerduty {routing_key, api_url?}, " +
        "opsgenie {api_key, api_url?}, telegram {bot_token, chat_id, api_url?}, ntfy {topic_url, token?, priority?}",
    ),
});
export type ChannelBody = z.output<typeof channelBody>;

/** PUT /v1/channels/{id}: the fields sent change; secret settings left out are kept. */
export const channelUpdateBody = z.strictObject({
  type: z.enum(CHANNEL_TYPES, { error: `must be one of ${CHANNEL_TYPES.join(", ")}` }).optional(),
  name: name.optional(),
  settings: z
    .record(z.string(), z.unknown(), { error: "must be an object of the type's settings" })
    .optional(),
});
export type ChannelUpdateBody = z.output<typeof channelUpdateBody>;

/** The settings of the two channel types that need no provider module. */
export const emailSettings = z.strictObject({
  addresses: z
    .array(z.email({ error: "must be e-mail addresses such as oncall@example.com" }), {
      error: "must be an array of e-mail addresses",
    })
    .min(1, { error: "must name at least one address" })
    .max(MAX_EMAIL_ADDRESSES, { error: `must name at most ${MAX_EMAIL_ADDRESSES} addresses` }),
});
export const webhookSettings = z.strictObject({
  url: z
    .string({ error: "must be a string: the https URL Vigil POSTs alerts to" })
    .max(MAX_URL_LENGTH, { error: `must be at most ${MAX_URL_LENGTH} characters` }),
});

/** Parses `settings` of a type with its schema: a problem is a 400 naming `body.settings.<field>`. */
export function parseSettings<S extends z.ZodType>(schema: S, raw: unknown, type: ChannelType): z.output<S> {
  const r = schema.safeParse(raw);
  if (r.success) return r.data;
  const i = r.error.issues[0] as z.core.$ZodIssue;
  const path =
    i.code === "unrecognized_keys" ? [...i.path.map(String), String(i.keys[0])] : i.path.map(String);
  const field = ["body", "settings", ...path].join(".");
  throw invalidInput(field, `${issueMessage(raw, i)} (a ${type} channel)`);
}

const id = z.uuid({ error: "must be a channel id (a UUID; see GET /v1/channels)" }).toLowerCase();
const MAX_RULE_CHANNELS = 50;
const MAX_RULE_CONNECTIONS = 500;

/** POST/PUT /v1/routing-rules. */
export const ruleBody = z.strictObject({
  channel_ids: z
    .array(id, { error: "must be an array of channel ids" })
    .max(MAX_RULE_CHANNELS, { error: `must name at most ${MAX_RULE_CHANNELS} channels` }),
  kinds: z
    .array(z.enum(ROUTING_KINDS, { error: `must be kinds among ${ROUTING_KINDS.join(", ")}` }))
    .min(1, { error: "must name at least one kind, or be null for all" })
    .nullable()
    .default(null),
  connection_ids: z
    .array(z.uuid({ error: "must be a connection id (a UUID)" }).toLowerCase(), {
      error: "must be an array of connection ids, or null for all",
    })
    .min(1, { error: "must name at least one connection, or be null for all" })
    .max(MAX_RULE_CONNECTIONS, { error: `must name at most ${MAX_RULE_CONNECTIONS} connections` })
    .nullable()
    .default(null),
  send_recoveries: z.boolean({ error: "must be true or false" }).default(true),
  escalate_after_minutes: z
    .number({ error: "must be a whole number of minutes from 1 to 1440, or null" })
    .int({ error: "must be a whole number of minutes from 1 to 1440, or null" })
    .min(1, { error: "must be at least 1 minute" })
    .max(1440, { error: "must be at most 1440 minutes (a day)" })
    .nullable()
    .default(null),
  repeat_every_minutes: z
    .number({ error: "must be a whole number of minutes from 1 to 1440, or null" })
    .int({ error: "must be a whole number of minutes from 1 to 1440, or null" })
    .min(1, { error: "must be at least 1 minute" })
    .max(1440, { error: "must be at most 1440 minutes (a day)" })
    .nullable()
    .default(null),
  escalation_channel_ids: z
    .array(id, { error: "must be an array of channel ids" })
    .max(MAX_RULE_CHANNELS, { error: `must name at most ${MAX_RULE_CHANNELS} channels` })
    .default([]),
});
export type RuleBody = z.output<typeof ruleBody>;

export const notificationSettingsBody = z.strictObject({
  email_owners: z.boolean({ error: "must be true or false" }),
});

/** An id in the path. */
export const idParams = z.strictObject({
  id: z.uuid({ error: "must be an id (a UUID)" }).toLowerCase(),
});
