import pLimit from "p-limit";
import type { Agent } from "undici";
import { type AppContext, perApp } from "../core/context.js";
import { type AttemptOutcome, CLAIM_MS, OwedMarks } from "../notifications/delivery.js";
import { claimDue, connectionNames, type PendingNotification } from "../notifications/repository.js";
import { payloadOf, signatureHeader } from "./payload.js";
import { selectWebhookSecret } from "./repository.js";
import { settingsOf } from "../channels/channels.js";
import { selectChannel } from "../channels/repository.js";
import { createWebhookAgent, postWebhook, WEBHOOK_TIMEOUT_MS } from "./send.js";
import { checkWebhookUrl, rulesOf } from "./url.js";

/** Webhooks posted at once by one run; each webhook's own alerts go one after another. */
const CONCURRENCY = 8;

/** This app's HTTP agent for webhooks, closed with the app (closeContext). */
const webhookAgent = perApp((ctx): { agent: Agent; close(): Promise<void> } => {
  const agent = createWebhookAgent({
    denyPrivate: ctx.config.outbound.denyPrivate,
    allowHttpLoopback: ctx.config.webhooks.allowHttpLoopback,
  });
  return { agent, close: () => agent.close() };
});

/** This app's webhook outcomes not yet recorded (the store refused the mark; see OwedMarks). */
const owedMarks = perApp(() => new OwedMarks());

/**
 * Delivers the outbox's `webhook` notifications that are due, like e-mail delivery does
 * (notifications/delivery.ts): each is claimed (FOR UPDATE SKIP LOCKED, so nodes share the
 * outbox), POSTed, then marked sent, or failed and retried with back-off until it is given up,
 * each outcome of an incident's alert in its timeline. Runs as the `webhook-delivery` job every
 * 2 s (jobs/jobs.ts), whether or not SMTP_URL is set; a slow receiver (at most 10 s) never holds
 * up e-mail. Returns how many were delivered.
 *
 * A notification whose webhook was deleted is given up (never sent); one whose URL the
 * configuration no longer allows (WEBHOOK_ALLOW_HTTP_LOOPBACK turned off, PUBLIC_URL moved onto
 * it, PROBE_DENY_PRIVATE turned on for its literal address) is given up too. One whose host
 * name resolves into a refused range (src/lib/outbound.ts) fails with the refusal and is
 * retried like any failure (DNS may change), until given up. A crash between the receiver's 2xx and the mark can repeat a delivery
 * after the claim expires: `Vigil-Delivery` (the notification id) lets a receiver drop it.
 */
export async function deliverWebhooks(
  ctx: AppContext,
  opts: { batch?: number; timeoutMs?: number } = {},
): Promise<number> {
  const db = ctx.stores.db;
  const marks = owedMarks(ctx);
  await marks.flush(db, ctx.now(), ctx.log);
  const at = ctx.now();
  const claimed = await claimDue(db, {
    channel: "webhook",
    batch: opts.batch ?? 20,
    at,
    claimUntil: new Date(at.getTime() + CLAIM_MS),
  });
  if (claimed.length === 0) return 0;
  const names = await connectionNames(db, [
    ...new Set(claimed.map((n) => n.connection_id).filter((id): id is string => id !== null)),
  ]);
  // one queue per webhook, in the order its alerts became due (a failure before its recovery)
  const queues = new Map<string, PendingNotification[]>();
  for (const n of claimed) {
    const key = n.webhook_id ?? (n.channel_id ? `channel:${n.channel_id}` : `gone:${n.id}`);
    const q = queues.get(key);
    if (q) q.push(n);
    else queues.set(key, [n]);
  }
  const limit = pLimit(CONCURRENCY);
  let sent = 0;
  await Promise.all(
    [...queues.values()].map((queue) =>
      limit(async () => {
        for (const n of queue) {
          const name = n.connection_id ? (names.get(n.connection_id) ?? null) : null;
          const outcome = await attempt(ctx, n, name, opts.timeoutMs ?? WEBHOOK_TIMEOUT_MS);
          const { giveUp } = await marks.settle(db, n, outcome, ctx.now(), ctx.log);
          if (outcome.error === null) {
            sent++;
            continue;
          }
          // the origin only: the URL's path may hold a token
          ctx.log.warn(
            {
              notification: n.id,
              webhook: n.webhook_id,
              to: n.recipient,
              attempt: n.attempts,
              err: outcome.error,
            },
            giveUp ? "webhook given up" : "webhook failed; will retry",
          );
        }
      }),
    ),
  );
  return sent;
}

/** One attempt at one notification: the webhook's URL and secret, the signed POST, its outcome. */
async function attempt(
  ctx: AppContext,
  n: PendingNotification,
  connectionName: string | null,
  timeoutMs: number,
): Promise<AttemptOutcome> {
  let url: string;
  let secret: string;
  if (n.webhook_id) {
    const hook = await selectWebhookSecret(ctx.stores.db, n.webhook_id);
    if (!hook) return { error: "not sent: the webhook was deleted", giveUp: true };
    try {
      url = ctx.credentials.decrypt(hook.url_enc);
      secret = ctx.credentials.decrypt(hook.secret_enc);
    } catch (err) {
      // retried: an operator who rotated VIGIL_SECRET can still add the old one back
      return { error: `cannot decrypt the webhook's URL or secret: ${(err as Error).message}` };
    }
  } else {
    // a webhook channel of /v1/channels
    const channel = n.channel_id ? await selectChannel(ctx.stores.db, n.channel_id) : null;
    if (!channel) return { error: "not sent: the webhook was deleted", giveUp: true };
    try {
      url = String(settingsOf(ctx, channel).url);
      secret = channel.signing_secret_enc ? ctx.credentials.decrypt(channel.signing_secret_enc) : "";
    } catch (err) {
      return { error: `cannot decrypt the webhook's URL or secret: ${(err as Error).message}` };
    }
  }
  let target: URL;
  try {
    target = checkWebhookUrl(url, rulesOf(ctx.config));
  } catch (err) {
    return { error: `not sent: the URL is no longer allowed (${(err as Error).message})`, giveUp: true };
  }
  const body = JSON.stringify(payloadOf(n, connectionName));
  return {
    error: await postWebhook(
      webhookAgent(ctx).agent,
      target,
      body,
      {
        "Content-Type": "application/json",
        "User-Agent": "Vigil-Webhook/1",
        "Vigil-Signature": signatureHeader(secret, body, ctx.now()),
        "Vigil-Delivery": n.id,
        "Vigil-Attempt": String(n.attempts),
      },
      timeoutMs,
    ),
  };
}
