import { hash } from "node:crypto";
import { invalidInput } from "../core/errors.js";
import type { AppContext } from "../core/context.js";
import type { IngestionKeyActor } from "../core/actor.js";
import type { gatewayModelUsage, RowOf } from "../stores/series/tables.js";
import type { HeartbeatBody } from "./heartbeat-schema.js";
import { costUsd } from "./pricing.js";
import { heartbeatRepeats } from "./repeats.js";
import { priceBook } from "./pricing.js";
import { recordGatewayBeats } from "./record.js";
import { heartbeatsIngested } from "../lib/metrics.js";

/** How far in the future a period may end before it is refused as a clock error. */
const MAX_CLOCK_SKEW_MS = 5 * 60_000;

/** Stable JSON (sorted keys), so the same body always hashes the same. */
function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(",")}]`;
  if (v && typeof v === "object")
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical((v as Record<string, unknown>)[k])}`)
      .join(",")}}`;
  return JSON.stringify(v);
}

const CANONICAL_ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const digits = (s: string, from: number, n: number) => {
  let v = 0;
  for (let i = from; i < from + n; i++) v = v * 10 + s.charCodeAt(i) - 48;
  return v;
};

/**
 * `d.toISOString()`, where `text` is the timestamp `d` was read from: `text` itself when it
 * already is exactly that string (what most daemons send: JavaScript's own form), checked field by
 * field, else written out. A quarter of the cost of writing it, twice per heartbeat.
 */
export function isoOf(d: Date, text: string): string {
  const same =
    CANONICAL_ISO.test(text) &&
    d.getUTCFullYear() === digits(text, 0, 4) &&
    d.getUTCMonth() + 1 === digits(text, 5, 2) &&
    d.getUTCDate() === digits(text, 8, 2) &&
    d.getUTCHours() === digits(text, 11, 2) &&
    d.getUTCMinutes() === digits(text, 14, 2) &&
    d.getUTCSeconds() === digits(text, 17, 2) &&
    d.getUTCMilliseconds() === digits(text, 20, 3);
  return same ? text : d.toISOString();
}

type HeartbeatIdentity = { id: string; ts: Date; start?: Date; end?: Date };

/**
 * How a repeat is recognised: a heartbeat with a token period is identified by its connection
 * and the period's start and end, and stored at the period's end; a resend of that period,
 * even with other content, replaces the stored rows instead of adding to them. A heartbeat
 * without a period is identified by a digest of its body: a resend within the repeat window is
 * stored at the first arrival's second (see {@link PeriodlessRepeats}).
 */
export function heartbeatIdentity(
  ctx: AppContext,
  connectionId: string,
  body: HeartbeatBody,
  received: Date,
): HeartbeatIdentity | Promise<HeartbeatIdentity> {
  const period = body.tokens?.period;
  if (!period) {
    const digest = hash("sha256", `body\n${connectionId}\n${canonical(body)}`, "hex");
    return heartbeatRepeats(ctx).place(connectionId, digest, received);
  }
  // a period's identity is computed, not looked up: no promise
  const start = new Date(period.startedAt);
  const end = new Date(period.endedAt);
  const material = `period\n${connectionId}\n${isoOf(start, period.startedAt)}\n${isoOf(end, period.endedAt)}`;
  const id = `hb_${hash("sha256", material, "hex").slice(0, 32)}`;
  return { id, ts: end, start, end };
}

/**
 * POST /v1/gateway/ingest: stores the heartbeat (health, latency, version, host signals, the
 * period's token totals), one row per byModel entry (priced from the pricing table when the
 * daemon gave no cost), and an availability sample; then counts it as a check of the gateway
 * (probes/heartbeats.ts: healthy makes the connection active, a run of unhealthy ones opens an
 * availability incident; a resent old heartbeat counts for nothing). Resolves only after the
 * series store committed all of it.
 */
export async function ingestHeartbeat(ctx: AppContext, p: IngestionKeyActor, body: HeartbeatBody) {
  const connectionId = p.connectionId;
  const received = ctx.now();
  const period = body.tokens?.period;
  if (period && Date.parse(period.endedAt) > received.getTime() + MAX_CLOCK_SKEW_MS)
    throw invalidInput("tokens.period.endedAt", "is in the future; check the daemon's clock", {});
  const identity = heartbeatIdentity(ctx, connectionId, body, received);
  const { id, ts, start, end } = identity instanceof Promise ? await identity : identity;

  const models: RowOf<typeof gatewayModelUsage>[] = [];
  for (const m of body.tokens?.byModel ?? []) {
    let cost = m.estimatedCostUsd;
    let source = "reported";
    if (cost === undefined) {
      const prices = priceBook(ctx);
      let price = prices.priceNow(m.model, ts);
      if (price === undefined) price = await prices.priceOf(m.model, ts);
      cost = price ? costUsd(price, { input: m.inputTokens, output: m.outputTokens }) : 0;
      source = price ? "priced" : "unpriced";
    }
    models.push({
      ts,
      connection_id: connectionId,
      heartbeat_id: id,
      model: m.model,
      input_tokens: m.inputTokens,
      output_tokens: m.outputTokens,
      cost_usd: cost,
      cost_source: source,
    });
  }

  const pidAlive = body.system?.gatewayPidAlive ?? true;
  // The period's own estimate when given, else the sum of the per-model costs.
  const spentUsd = period?.estimatedCostUsd ?? models.reduce((s, m) => s + m.cost_usd, 0);
  await recordGatewayBeats(ctx, [
    {
      heartbeat: {
        ts,
        connection_id: connectionId,
        heartbeat_id: id,
        status: body.gateway.status,
        healthy: body.gateway.status === "healthy",
        latency_ms: body.gateway.latencyMs,
        version: body.gateway.version,
        pid_alive: pidAlive,
        system: body.system ? JSON.stringify(body.system) : null,
        period_start: start ?? null,
        period_end: end ?? null,
        input_tokens: period?.inputTokens ?? 0,
        output_tokens: period?.outputTokens ?? 0,
        cache_read_tokens: period?.cacheReadTokens ?? 0,
        cache_write_tokens: period?.cacheWriteTokens ?? 0,
        request_count: period?.requestCount ?? 0,
        cost_usd: spentUsd,
        received_at: received,
      },
      models,
    },
  ]);
  heartbeatsIngested.inc();
  return { message: "Heartbeat recorded", heartbeat_id: id };
}
