import { randomUUID } from "node:crypto";
import type { Actor } from "../core/actor.js";
import type { AppContext } from "../core/context.js";
import { conflict, forbidden, notFound } from "../core/errors.js";
import {
  accountOf as alertAccountOf,
  managedAccount as alertManagedAccount,
} from "../notifications/account.js";
import { recordDelivery } from "../incidents/incidents.js";
import type { NotificationKind } from "../notifications/repository.js";
import { newSecret } from "./payload.js";
import {
  deleteWebhookRow,
  giveUpPendingOf,
  insertWebhook,
  lockAccount,
  lockAccountWebhook,
  selectAccountWebhooks,
  selectAccountWebhookSecrets,
  type WebhookAccount,
  type WebhookRow,
} from "./repository.js";
import { checkWebhookUrl, originOf, rulesOf, urlHint } from "./url.js";

/**
 * Outbound webhooks (docs/webhooks.md): per account (a personal key's user, or an organization
 * key's organization, as budgets decide it), each alert of the account is also POSTed, signed, to
 * every webhook of it (the outbox rows are written by notifications/repository.ts, delivered by
 * delivery.ts). Adding or removing an organization's webhook needs its admin or owner role.
 */

/** An account has at most this many webhooks. */
export const MAX_WEBHOOKS_PER_ACCOUNT = 10;

/** A webhook as listed: never its URL (it may hold a token) nor its secret. */
export interface Webhook {
  id: string;
  /** The URL's scheme, host and port, e.g. `https://hooks.example.com`. */
  origin: string;
  /** The origin and the URL's last 4 characters, to tell webhooks of one origin apart. */
  url_hint: string;
  created_at: string;
}

/** The answer to adding one: the whole URL and the signing secret, shown this once. */
export interface CreatedWebhook extends Webhook {
  url: string;
  secret: string;
}

const accountOf = (actor: Actor): WebhookAccount => alertAccountOf(actor, "webhooks");
/** The account of someone who may change its webhooks: an organization's needs its admin or owner role. */
const managedAccount = (ctx: AppContext, actor: Actor) => alertManagedAccount(ctx, actor, "webhooks");

const shown = (r: WebhookRow): Webhook => ({
  id: r.id,
  origin: r.url_origin,
  url_hint: r.url_hint,
  created_at: new Date(r.created_at).toISOString(),
});

/**
 * POST /v1/webhooks: adds a webhook to the caller's account. The URL must pass the rules of
 * url.ts (400 naming `body.url`); an account holds at most MAX_WEBHOOKS_PER_ACCOUNT, and one URL
 * once (409). The URL and the new secret are stored encrypted and answered this once.
 */
export async function createWebhook(
  ctx: AppContext,
  actor: Actor,
  input: { url: string },
): Promise<CreatedWebhook> {
  const account = await managedAccount(ctx, actor);
  const url = checkWebhookUrl(input.url, rulesOf(ctx.config));
  const id = randomUUID();
  const secret = newSecret();
  const at = ctx.now();
  const box = ctx.credentials;
  await ctx.stores.db.transaction(async (tx) => {
    if (!(await lockAccount(tx, account))) throw forbidden("The key's account no longer exists");
    const existing = await selectAccountWebhookSecrets(tx, account);
    if (existing.length >= MAX_WEBHOOKS_PER_ACCOUNT)
      throw conflict(
        `An account has at most ${MAX_WEBHOOKS_PER_ACCOUNT} webhooks and this one has ${existing.length}; delete one (DELETE /v1/webhooks/{id}) before adding another`,
      );
    const same = existing.find((w) => {
      try {
        return box.decrypt(w.url_enc) === url.href;
      } catch {
        return false;
      }
    });
    if (same)
      throw conflict(
        `body.url: this account already has a webhook for this URL (id ${same.id}); delete it first to get a new secret`,
      );
    await insertWebhook(tx, {
      id,
      account,
      urlEnc: box.encrypt(url.href),
      origin: originOf(url),
      hint: urlHint(url),
      secretEnc: box.encrypt(secret),
      at,
    });
  });
  return {
    id,
    url: url.href,
    secret,
    origin: originOf(url),
    url_hint: urlHint(url),
    created_at: at.toISOString(),
  };
}

/** GET /v1/webhooks: the caller's account's webhooks, oldest first, without URL or secret. */
export async function listWebhooks(ctx: AppContext, actor: Actor): Promise<{ webhooks: Webhook[] }> {
  const rows = await selectAccountWebhooks(ctx.stores.db, accountOf(actor));
  return { webhooks: rows.map(shown) };
}

const DELETED = "not sent: the webhook was deleted";

/**
 * DELETE /v1/webhooks/{id}: removes one of the caller's account's webhooks; another account's,
 * like an absent one, is not found (its existence is not revealed). Its alerts not delivered yet
 * are given up in the same transaction (each incident's timeline says so); the alert history
 * keeps its rows (their webhook_id becomes null).
 */
export async function deleteWebhook(
  ctx: AppContext,
  actor: Actor,
  id: string,
): Promise<{ id: string; deleted: true }> {
  const account = await managedAccount(ctx, actor);
  const at = ctx.now();
  await ctx.stores.db.transaction(async (tx) => {
    if (!(await lockAccountWebhook(tx, account, id))) throw notFound(`Webhook ${id} not found`);
    for (const n of await giveUpPendingOf(tx, id, DELETED))
      if (n.incident_id)
        await recordDelivery(tx, {
          incidentId: n.incident_id,
          notificationId: n.id,
          kind: n.kind as NotificationKind,
          channel: "webhook",
          recipient: n.recipient,
          attempt: n.attempts,
          outcome: "given_up",
          error: DELETED,
          at,
        });
    await deleteWebhookRow(tx, id);
  });
  return { id, deleted: true };
}
