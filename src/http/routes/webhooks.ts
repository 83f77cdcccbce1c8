import { webhookBody, validateWebhookBody, webhookParams } from "../../webhooks/schema.js";
import {
  MAX_WEBHOOKS_PER_ACCOUNT,
  createWebhook,
  deleteWebhook,
  listWebhooks,
} from "../../webhooks/webhooks.js";
import { envelopeError } from "../responses/errors.js";
import { createdWebhook, webhookDeleted, webhookList } from "../responses/webhooks.js";
import { defineRoute } from "../route.js";

/**
 * Outbound webhooks of the caller's account (docs/webhooks.md): a personal key's user, or an
 * organization key's organization (adding or removing one of an organization's needs its admin
 * or owner role). The envelope error body, as /v1/budget.
 */
const tag = "Webhooks";
const account =
  "The account is a personal key's user or an organization key's organization; adding or removing an " +
  "organization's webhook needs the admin or owner role.";

export const webhookRoutes = [
  defineRoute({
    tag,
    errorStyle: "envelope",
    method: "POST",
    path: "/v1/webhooks",
    summary: "Add a webhook: every alert of the account is also POSTed to it, signed",
    description:
      `Body: {"url": "https://…"}. Answers the webhook with its signing secret, shown only this once. ${account} ` +
      "The URL must be absolute and https (plain http only to a loopback host when the server sets " +
      "WEBHOOK_ALLOW_HTTP_LOOPBACK=true), at most 2048 characters, without a user name or password, and not Vigil " +
      `itself: otherwise 400 naming body.url. At most ${MAX_WEBHOOKS_PER_ACCOUNT} webhooks per account, one per URL: 409. ` +
      'Each delivery is a JSON POST with Vigil-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>" ' +
      "keyed by the secret>, retried with back-off, and listed in GET /v1/alerts (channel webhook).",
    auth: "connections:write",
    body: webhookBody,
    parseBody: validateWebhookBody,
    status: 201,
    responses: { 201: createdWebhook, 409: envelopeError },
    handler: ({ ctx, actor, body }) => createWebhook(ctx, actor, body),
  }),
  defineRoute({
    tag,
    errorStyle: "envelope",
    method: "GET",
    path: "/v1/webhooks",
    summary: "The account's webhooks (without URL or secret)",
    description:
      "Each webhook's id, origin, a hint of its URL and when it was added. The whole URL (it may hold a token) " +
      "and the secret are shown only when the webhook is added.",
    auth: "connections:read",
    status: 200,
    responses: { 200: webhookList },
    handler: ({ ctx, actor }) => listWebhooks(ctx, actor),
  }),
  defineRoute({
    tag,
    errorStyle: "envelope",
    method: "DELETE",
    path: "/v1/webhooks/:id",
    summary: "Remove a webhook",
    description:
      `${account} Its alerts not delivered yet are given up (never sent). 404 when the account has no such ` +
      "webhook (another account's is not found either).",
    auth: "connections:write",
    params: webhookParams,
    status: 200,
    responses: { 200: webhookDeleted },
    handler: ({ ctx, actor, params }) => deleteWebhook(ctx, actor, params.id),
  }),
];
