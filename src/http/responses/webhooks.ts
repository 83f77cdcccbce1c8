import { z } from "zod";
import { timestamp } from "./common.js";

const listed = {
  id: z.string(),
  origin: z
    .string()
    .describe(
      "the URL's scheme, host and port, e.g. https://hooks.example.com (the alert history's recipient)",
    ),
  url_hint: z
    .string()
    .describe(
      "the origin and the URL's last 4 characters, to tell webhooks apart; the whole URL is not shown again",
    ),
  created_at: timestamp,
};

/** One webhook as listed: never its URL (it may hold a token) nor its secret. */
export const webhook = z.object(listed);

export const webhookList = z.object({
  webhooks: z.array(webhook).describe("the account's webhooks, oldest first (at most 10)"),
});

/** The answer to POST /v1/webhooks: the URL and the signing secret, shown only this once. */
export const createdWebhook = z.object({
  ...listed,
  url: z.string().describe("the URL as stored (normalized); shown only in this answer"),
  secret: z
    .string()
    .describe(
      "the signing secret (whsec_…), shown only in this answer: verify each delivery's Vigil-Signature with it",
    ),
});

export const webhookDeleted = z.object({ id: z.string(), deleted: z.literal(true) });
