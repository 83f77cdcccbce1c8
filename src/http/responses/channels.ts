import { z } from "zod";
import { CHANNEL_TYPES } from "../../channels/providers/types.js";
import { ROUTING_KINDS } from "../../channels/routing.js";
import { oneOf, timestamp } from "./common.js";

/** A notification channel as answered: never a secret setting's value. */
export const channel = z.object({
  id: z.string(),
  type: oneOf(CHANNEL_TYPES),
  name: z.string(),
  settings: z
    .record(z.string(), z.unknown())
    .describe(
      "the settings that are not secret (chat_id, priority, api_url, addresses); secrets are never answered",
    ),
  secret_settings: z
    .array(z.string())
    .describe(
      "the names of the secret settings stored (webhook_url, routing_key, api_key, bot_token, token, topic_url, url)",
    ),
  hint: z
    .string()
    .describe("names the channel without its secrets, e.g. hooks.slack.com/…x7Qa or chat 12345"),
  organization_id: z.string().nullable(),
  created_at: timestamp,
  updated_at: timestamp,
});

export const createdChannel = channel.extend({
  signing_secret: z
    .string()
    .optional()
    .describe("a webhook channel's signing secret (whsec_…), shown only in this answer"),
});

export const channelList = z.object({ channels: z.array(channel).describe("oldest first") });
export const channelDeleted = z.object({ id: z.string(), deleted: z.literal(true) });

export const channelTest = z.object({
  id: z.string(),
  type: oneOf(CHANNEL_TYPES),
  ok: z.literal(true),
  sent: z
    .array(
      z.object({
        event: z.string().describe("trigger, resolve (a paging provider's test is resolved at once) or info"),
        status: z.number().int().nullable().describe("the provider's HTTP status; null for e-mail"),
        answer: z.string().describe("the start of the provider's answer (at most 500 characters)"),
      }),
    )
    .describe("each request sent, in order"),
});

export const routingRule = z.object({
  id: z.string(),
  channel_ids: z.array(z.string()),
  kinds: z.array(oneOf(ROUTING_KINDS)).nullable().describe("null: every kind"),
  connection_ids: z.array(z.string()).nullable().describe("null: every connection of the account"),
  send_recoveries: z.boolean(),
  escalate_after_minutes: z.number().int().nullable(),
  repeat_every_minutes: z.number().int().nullable(),
  escalation_channel_ids: z.array(z.string()),
  organization_id: z.string().nullable(),
  created_at: timestamp,
  updated_at: timestamp,
});
export const routingRuleList = z.object({ routing_rules: z.array(routingRule).describe("oldest first") });
export const routingRuleDeleted = z.object({ id: z.string(), deleted: z.literal(true) });

export const notificationSettings = z.object({
  email_owners: z
    .boolean()
    .describe("whether the account's owners (an organization's owners and admins) get every alert by e-mail"),
});
