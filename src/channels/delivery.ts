import pLimit from "p-limit";
import { type AppContext, perApp } from "../core/context.js";
import { CLAIM_MS, OwedMarks } from "../notifications/delivery.js";
import { connectionNames, type PendingNotification, releaseClaims } from "../notifications/repository.js";
import { alertOf } from "./alert.js";
import { settingsOf } from "./channels.js";
import { providerOf } from "./providers/index.js";
import type { ProviderType } from "./providers/types.js";
import { incidentKinds, leaseChannelRows, releaseChannelLease, selectChannel } from "./repository.js";
import { sendThrough } from "./send.js";

/** The outbox channels this job sends: every type with a provider module. */
export const PROVIDER_CHANNELS: readonly ProviderType[] = [
  "slack",
  "teams",
  "discord",
  "pagerduty",
  "opsgenie",
  "telegram",
  "ntfy",
];

/** Channels sent to at once by one run; each channel's own alerts go one after another. */
const CONCURRENCY = 64;

const owedMarks = perApp(() => new OwedMarks());

/**
 * Delivers the outbox rows of provider channels (Slack, Teams, Discord, PagerDuty, Opsgenie,
 * Telegram, ntfy) that are due, as e-mail and webhook delivery do, with one more rule: a channel's
 * alerts go out in the order they became due, across retries and nodes (a resolve never overtakes
 * its trigger). A run leases the channels it sends to (`channels.delivering_until`, so one node at
 * a time sends a channel's alerts; a lease of a node that died runs out after CLAIM_MS) and claims
 * their due rows in order, never past a row of the channel that waits for a retry. Each row is
 * sent, then marked sent, or failed and retried with back-off until given up, each outcome of an
 * incident's alert in its timeline (notifications/delivery.ts `settleAttempt`). A failure that will
 * be retried hands the rest of that channel's claimed rows back unattempted; a provider's rate
 * limit (429 Retry-After, Telegram's retry_after) makes them due when the provider said. Other
 * channels are never held up. A 4xx a retry cannot change gives up at once (the row's last_error
 * says why). Runs as the `channel-delivery` job every second (jobs/jobs.ts), batches one after
 * another while a burst lasts (`drainChannels`). Returns how many were delivered.
 */
export async function deliverChannels(
  ctx: AppContext,
  opts: { batch?: number; timeoutMs?: number } = {},
): Promise<number> {
  return (await deliverBatch(ctx, opts)).sent;
}

/**
 * The `channel-delivery` job's run: batches one after another while each came full (a burst of
 * alerts: 1,000 incidents opening at once), for at most `budgetMs`, so a burst drains in one run
 * instead of one batch a second. Returns how many were delivered.
 */
export async function drainChannels(
  ctx: AppContext,
  opts: { batch?: number; budgetMs?: number } = {},
): Promise<number> {
  const batch = opts.batch ?? 100;
  const end = Date.now() + (opts.budgetMs ?? 10_000);
  let sent = 0;
  for (;;) {
    const r = await deliverBatch(ctx, { batch });
    sent += r.sent;
    if (r.claimed < batch || Date.now() >= end) return sent;
  }
}

async function deliverBatch(
  ctx: AppContext,
  opts: { batch?: number; timeoutMs?: number },
): Promise<{ sent: number; claimed: number }> {
  const db = ctx.stores.db;
  const marks = owedMarks(ctx);
  await marks.flush(db, ctx.now(), ctx.log);
  const at = ctx.now();
  const { rows: claimed } = await leaseChannelRows(db, {
    types: PROVIDER_CHANNELS,
    at,
    until: new Date(at.getTime() + CLAIM_MS),
    batch: opts.batch ?? 100,
    channels: CONCURRENCY,
  });
  if (claimed.length === 0) return { sent: 0, claimed: 0 };
  const connectionIds = [...new Set(claimed.flatMap((n) => (n.connection_id ? [n.connection_id] : [])))];
  const incidentIds = [...new Set(claimed.flatMap((n) => (n.incident_id ? [n.incident_id] : [])))];
  const [names, kinds] = await Promise.all([
    connectionNames(db, connectionIds),
    incidentKinds(db, incidentIds),
  ]);
  const queues = new Map<string, PendingNotification[]>();
  for (const n of claimed) {
    const key = n.channel_id ?? `gone:${n.id}`;
    const q = queues.get(key);
    if (q) q.push(n);
    else queues.set(key, [n]);
  }
  const limit = pLimit(CONCURRENCY);
  let sent = 0;
  await Promise.all(
    [...queues.entries()].map(([key, queue]) =>
      limit(async () => {
        try {
          await sendQueue(key, queue);
        } finally {
          if (!key.startsWith("gone:"))
            await releaseChannelLease(db, key).catch((err: unknown) =>
              ctx.log.warn(
                { channel: key, err: (err as Error).message },
                "a channel's delivery lease could not be released; it runs out by itself",
              ),
            );
        }
      }),
    ),
  );
  return { sent, claimed: claimed.length };

  async function sendQueue(key: string, queue: PendingNotification[]): Promise<void> {
    const channel = key.startsWith("gone:") ? null : await selectChannel(db, key);
    let settings: Record<string, unknown> | null = null;
    let broken: string | null = null;
    if (channel)
      try {
        settings = settingsOf(ctx, channel);
      } catch (err) {
        broken = `cannot decrypt the channel's settings: ${(err as Error).message}`;
      }
    for (const [i, n] of queue.entries()) {
      let outcome;
      if (!channel || !settings)
        outcome = channel
          ? { error: broken as string }
          : { error: "not sent: the channel was deleted", giveUp: true };
      else {
        const alert = alertOf(n, {
          connectionName: n.connection_id ? (names.get(n.connection_id) ?? null) : null,
          incidentKind: n.incident_id ? (kinds.get(n.incident_id) ?? null) : null,
          publicUrl: ctx.config.publicUrl,
        });
        outcome = await sendThrough(
          ctx,
          providerOf(channel.type as ProviderType),
          settings,
          alert,
          opts.timeoutMs,
        );
      }
      const { giveUp } = await marks.settle(db, n, outcome, ctx.now(), ctx.log);
      if (outcome.error === null) {
        sent++;
        continue;
      }
      ctx.log.warn(
        {
          notification: n.id,
          channel: n.channel_id,
          type: n.channel,
          attempt: n.attempts,
          err: outcome.error,
        },
        giveUp ? "channel notification given up" : "channel notification failed; will retry",
      );
      if (!giveUp && i + 1 < queue.length) {
        // this row is retried later: the rest of the channel's rows go back unattempted, so none
        // overtakes it (due again when the provider asked, or at once: they wait for it anyway)
        const wait = "retryAfterMs" in outcome ? (outcome.retryAfterMs ?? 0) : 0;
        await releaseClaims(
          db,
          queue.slice(i + 1).map((r) => r.id),
          new Date(ctx.now().getTime() + wait),
        );
        return;
      }
    }
  }
}
