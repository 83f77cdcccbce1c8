import { z } from "zod";
import { invalidInput } from "../core/errors.js";
import { MAX_URL_LENGTH } from "./url.js";

const SEND = 'send {"url": "https://…"}, the address Vigil POSTs alerts to';

/** The body of POST /v1/webhooks, as the OpenAPI document describes it; `validateWebhookBody` parses it. */
export const webhookBody = z.strictObject({
  url: z
    .string()
    .max(MAX_URL_LENGTH)
    .describe(
      `the receiver's absolute URL, at most ${MAX_URL_LENGTH} characters: https (plain http only to a loopback host ` +
        "when the server sets WEBHOOK_ALLOW_HTTP_LOOPBACK=true), without a user name or password, not Vigil itself",
    ),
});

export type WebhookBody = z.output<typeof webhookBody>;

/**
 * Parses the body of POST /v1/webhooks: every problem of its shape is a 400 naming the field
 * (`body`, `body.url`, or the unknown field). The URL's own rules need the configuration and are
 * checked by the verb (url.ts).
 */
export function validateWebhookBody(raw: unknown): WebhookBody {
  if (raw === null || raw === undefined || typeof raw !== "object" || Array.isArray(raw))
    throw invalidInput("body", `must be a JSON object: ${SEND}`);
  const body = raw as Record<string, unknown>;
  const unknown = Object.keys(body).find((k) => k !== "url");
  if (unknown !== undefined) throw invalidInput(`body.${unknown}`, `is not a known field: ${SEND}`);
  if (!("url" in body) || body.url === undefined || body.url === null)
    throw invalidInput("body.url", `is required: ${SEND}`);
  if (typeof body.url !== "string") throw invalidInput("body.url", `must be a string: ${SEND}`);
  if (body.url.trim() === "") throw invalidInput("body.url", `must not be empty: ${SEND}`);
  return { url: body.url.trim() };
}

/** A webhook id in the path. */
export const webhookParams = z.strictObject({
  id: z.uuid({ error: "must be a webhook id (a UUID)" }).toLowerCase(),
});
