import { z } from "zod";
import { NOTIFICATION_KINDS } from "../../notifications/alerts.js";
import { CHANNEL_TYPES } from "../../channels/providers/types.js";
import { cursorPage, oneOf, timestamp } from "./common.js";

/** One notification of the alert history: one alert to one recipient (an e-mail address or a webhook). */
export const alert = z.object({
  id: z.string(),
  kind: oneOf(NOTIFICATION_KINDS),
  channel: oneOf(CHANNEL_TYPES).describe(
    "how it goes out: e-mail, a signed webhook, or the type of a channel of /v1/channels",
  ),
  recipient: z
    .string()
    .describe(
      "the e-mail address it goes to; for a webhook its URL's origin (e.g. https://hooks.slack.com), as the whole URL may hold a token; for another channel its hint (GET /v1/channels)",
    ),
  subject: z.string(),
  body: z.string(),
  status: oneOf(["pending", "sent", "failed", "suppressed"]).describe(
    "pending (waiting or retrying), sent, failed (given up after 10 attempts), suppressed (withheld by noise control)",
  ),
  attempts: z.number().int(),
  last_error: z.string().nullable(),
  created_at: timestamp,
  due_at: timestamp.describe(
    "when its first attempt was due: after created_at when noise control deferred it",
  ),
  sent_at: timestamp.nullable(),
  connection_id: z
    .string()
    .nullable()
    .describe("null for an account audit, and once the connection was deleted (the subject keeps its name)"),
  connection_name: z.string().nullable(),
  incident_id: z.string().nullable(),
  anomaly_id: z.string().nullable(),
  audit_event: oneOf([
    "api_key_created",
    "api_key_revoked",
    "connection_credentials_changed",
    "connection_deleted",
    "membership_changed",
    "organization_renamed",
  ])
    .nullable()
    .describe("for kind audit: what happened"),
  organization_id: z
    .string()
    .nullable()
    .describe("the organization it belongs to; null for a personal account's"),
  webhook_id: z
    .string()
    .nullable()
    .describe(
      "channel webhook: the webhook it goes to (GET /v1/webhooks); null for an e-mail and once the webhook was deleted",
    ),
  channel_id: z
    .string()
    .nullable()
    .describe(
      "the channel of /v1/channels it goes to; null for the account owners' e-mail, a webhook of /v1/webhooks, and once the channel was deleted",
    ),
});

export const alertPage = cursorPage(alert);
