import type { AppContext } from "../core/context.js";
import type { IngestionKeyActor } from "../core/actor.js";
import { perApp } from "../core/context.js";
import { LIMITS } from "../core/limits.js";
import { costUsd, priceBook } from "../ingest/pricing.js";
import { type GatewayBeat, recordGatewayBeats } from "../ingest/record.js";
import type { gatewayModelUsage, RowOf } from "../stores/series/tables.js";
import { otlpPoints } from "../lib/metrics.js";
import { sortTexts } from "../lib/sort-texts.js";
import { reportGatewayHealth } from "../probes/heartbeats.js";
import {
  digest,
  groupIncrements,
  type Increment,
  mapMetrics,
  mapSpans,
  MAX_MODELS_PER_GROUP,
  type UsageGroup,
  type UsagePoint,
} from "./map.js";
import { cumulativeState, MAX_SERIES_PER_INSTANCE, type TakenIncrements } from "./cumulative.js";
import { markTokenMetrics, tokenMetricsMarkedAt } from "./repository.js";
import type { OtlpMetricsRequest, OtlpTracesRequest } from "./types.js";

/**
 * OTLP ingest (issue #35; docs/otlp.md): a gateway's OpenTelemetry export becomes heartbeats,
 * stored exactly as POST /v1/gateway/ingest stores them (ingest/record.ts), so usage, budgets,
 * anomalies, missed-heartbeat detection and the dashboard read it with no change.
 */

/** What the endpoint answers: the OTLP partial success (0 rejected and no message: full success). */
export interface OtlpOutcome {
  rejected: number;
  message: string;
  /** Heartbeat rows written (one per instance and export interval). */
  heartbeats: number;
}

/** How long a connection's "exports token metrics" mark is trusted from memory. */
const MARK_TTL_MS = 60_000;
/** The mark is written again at most this often per connection and process. */
const MARK_REFRESH_MS = 5 * 60_000;

/** Per process: when each connection was last marked, and what was read of the mark. */
class TokenMetricMarks {
  readonly written = new Map<string, number>();
  readonly read = new Map<string, { at: number; markedAt: number | null }>();
}
const marks = perApp(() => new TokenMetricMarks());

function describe(parts: string[], ignored: Map<string, number> | number, what: string): string {
  const out = [...parts];
  if (typeof ignored === "number") {
    if (ignored > 0) out.push(`${ignored} ${what} without GenAI attributes ignored`);
  } else if (ignored.size > 0) {
    const names = [...ignored].slice(0, 5).map(([n, c]) => `${n} (${c})`);
    const more = ignored.size > 5 ? ` and ${ignored.size - 5} more` : "";
    out.push(`data points of metrics Vigil does not read, ignored: ${names.join(", ")}${more}`);
  }
  return out.join("; ").slice(0, 2000);
}

/** Groups with more models than a heartbeat may carry are refused whole (nothing half-stored). */
function capModels(groups: UsageGroup[], pointsOf: (g: UsageGroup) => number) {
  const kept: UsageGroup[] = [];
  let rejected = 0;
  const problems: string[] = [];
  for (const g of groups) {
    if (Math.max(g.input, g.output, g.cacheRead, g.cacheWrite, g.requests) > LIMITS.tokens) {
      const n = pointsOf(g);
      rejected += n;
      problems.push(
        `instance ${g.instance}: its counts in one export interval add up beyond ${LIMITS.tokens} (a heartbeat's limit); its ${n} ${n === 1 ? "item was" : "items were"} rejected`,
      );
    } else if (g.models.size > MAX_MODELS_PER_GROUP) {
      const n = pointsOf(g);
      rejected += n;
      problems.push(
        `instance ${g.instance}: ${g.models.size} models in one export interval, at most ${MAX_MODELS_PER_GROUP}; its ${n} ${n === 1 ? "item was" : "items were"} rejected`,
      );
    } else kept.push(g);
  }
  return { kept, rejected, problems };
}

/** The heartbeat row and model rows of a group, priced as a heartbeat's byModel is. */
async function beatOf(
  ctx: AppContext,
  connectionId: string,
  g: UsageGroup,
  received: Date,
): Promise<GatewayBeat> {
  const ts = new Date(g.timeMs);
  const prefix = g.signal === "metrics" ? "otm" : "ots";
  const id = `${prefix}_${digest(`${connectionId}\n${g.instance}\n${g.timeMs}\n${sortTexts(g.parts).join("\n")}`)}`;
  const models: RowOf<typeof gatewayModelUsage>[] = [];
  const prices = priceBook(ctx);
  const providers = new Set<string>();
  for (const m of g.models.values()) {
    for (const p of m.providers) providers.add(p);
    let price = prices.priceNow(m.model, ts);
    if (price === undefined) price = await prices.priceOf(m.model, ts);
    models.push({
      ts,
      connection_id: connectionId,
      heartbeat_id: id,
      model: m.model,
      input_tokens: m.input,
      output_tokens: m.output,
      cost_usd: price ? costUsd(price, { input: m.input, output: m.output }) : 0,
      cost_source: price ? "priced" : "unpriced",
    });
  }
  // every operation of the interval failed: the gateway is not serving (an incident after the usual run)
  const status = g.requests > 0 && g.errors >= g.requests ? "erroring" : "healthy";
  const system = {
    source: "otlp",
    signal: g.signal,
    instance: g.instance,
    providers: [...providers].sort(),
    errors: g.errors,
  };
  return {
    heartbeat: {
      ts,
      connection_id: connectionId,
      heartbeat_id: id,
      status,
      healthy: status === "healthy",
      latency_ms: g.durationCount > 0 ? (g.durationSeconds / g.durationCount) * 1000 : null,
      version: g.version,
      pid_alive: true,
      system: JSON.stringify(system),
      period_start: new Date(Math.min(g.fromMs, g.timeMs)),
      period_end: ts,
      input_tokens: g.input,
      output_tokens: g.output,
      cache_read_tokens: g.cacheRead,
      cache_write_tokens: g.cacheWrite,
      request_count: g.requests,
      cost_usd: models.reduce((s, m) => s + m.cost_usd, 0),
      received_at: received,
    },
    models,
  };
}

/**
 * The increments of a request's points. Delta points are increments already; cumulative ones are
 * taken against each series' previous point (cumulative.ts). A resend of a series' latest point
 * gives the increment it gave the first time (the same rows, stored once); an older point gives
 * nothing (it was counted).
 */
async function increments(
  ctx: AppContext,
  connectionId: string,
  points: UsagePoint[],
): Promise<TakenIncrements> {
  const out: Increment[] = [];
  const cumulative: UsagePoint[] = [];
  for (const p of points) {
    if (p.cumulative) cumulative.push(p);
    else out.push(p); // a delta point adds what it carries
  }
  if (cumulative.length === 0)
    return { incs: out, undo: async () => {}, release: () => {}, refused: new Map() };
  const taken = await cumulativeState(ctx).increments(connectionId, cumulative);
  for (const inc of taken.incs) out.push(inc);
  return { incs: out, undo: taken.undo, release: taken.release, refused: taken.refused };
}

/**
 * POST /v1/otlp/v1/metrics: the GenAI metrics of the export become one heartbeat per gateway
 * instance and export interval. Resolves after the series store committed them.
 *
 * Maps the request at once and lets go of it: the store's commit is waited for with only the
 * rows and the counts held (the decoded request and its points are garbage by then; under load a
 * hundred exports wait at any moment, and every scavenge copies what they hold).
 */
export function ingestOtlpMetrics(
  ctx: AppContext,
  p: IngestionKeyActor,
  req: OtlpMetricsRequest,
): Promise<OtlpOutcome> {
  const received = ctx.now();
  const mapped = mapMetrics(req, received.getTime());
  const summary: MappedSummary = {
    points: mapped.points.length,
    rejected: mapped.rejected,
    problems: mapped.problems,
    ignored: mapped.ignored,
    tokenMetrics: mapped.tokenMetrics,
  };
  return storeMetrics(ctx, p.connectionId, received, summary, { points: mapped.points });
}

/** What is kept of a mapped request while its rows are stored. */
interface MappedSummary {
  points: number;
  rejected: number;
  problems: string[];
  ignored: Map<string, number>;
  tokenMetrics: boolean;
}

async function storeMetrics(
  ctx: AppContext,
  connectionId: string,
  received: Date,
  mapped: MappedSummary,
  handed: { points: UsagePoint[] | null },
): Promise<OtlpOutcome> {
  const points = handed.points ?? [];
  handed.points = null; // held from here by this frame only, until the increments are taken
  if (mapped.tokenMetrics) await noteTokenMetrics(ctx, connectionId, received.getTime());
  const { incs, undo, release, refused } = await increments(ctx, connectionId, points);
  let tooMany = 0;
  const seriesProblems: string[] = [];
  for (const [instance, n] of refused) {
    tooMany += n;
    seriesProblems.push(
      `instance ${instance}: Vigil already follows ${MAX_SERIES_PER_INSTANCE} cumulative series of it, the most per instance, and none is unused for a day; ${n} ${n === 1 ? "point of a new series was" : "points of new series were"} rejected`,
    );
  }
  const beats = [];
  const capped = { rejected: 0, problems: [] as string[] };
  try {
    {
      // the groups (and their parts) are garbage once their rows are made
      const groups = capModels(groupIncrements(incs), (g) => g.parts.length);
      capped.rejected = groups.rejected;
      capped.problems = groups.problems;
      for (const g of groups.kept) beats.push(await beatOf(ctx, connectionId, g, received));
    }
    await recordGatewayBeats(ctx, beats);
  } catch (err) {
    // nothing of it was stored: the series' states go back, so a retry (or the next export)
    // counts these intervals again rather than losing them
    await undo();
    throw err;
  } finally {
    release();
  }
  otlpPoints.inc({ signal: "metrics", outcome: "stored" }, mapped.points - capped.rejected - tooMany);
  otlpPoints.inc({ signal: "metrics", outcome: "rejected" }, mapped.rejected + capped.rejected + tooMany);
  let ignored = 0;
  for (const n of mapped.ignored.values()) ignored += n;
  otlpPoints.inc({ signal: "metrics", outcome: "ignored" }, ignored);
  return {
    rejected: mapped.rejected + capped.rejected + tooMany,
    message: describe(
      [...mapped.problems, ...seriesProblems, ...capped.problems],
      mapped.ignored,
      "data points",
    ),
    heartbeats: beats.length,
  };
}

/**
 * POST /v1/otlp/v1/traces: GenAI spans become one heartbeat per instance and 10-second window.
 * A connection that exports GenAI token metrics has its usage counted from them: its spans then
 * count as liveness only, never twice.
 */
export async function ingestOtlpTraces(
  ctx: AppContext,
  p: IngestionKeyActor,
  req: OtlpTracesRequest,
): Promise<OtlpOutcome> {
  const received = ctx.now();
  const mapped = mapSpans(req, received.getTime());
  const connectionId = p.connectionId;
  const metricsMarked =
    mapped.groups.length > 0 && (await exportsTokenMetrics(ctx, connectionId, received.getTime()));
  const beats: GatewayBeat[] = [];
  let rejected = mapped.rejected;
  const problems = [...mapped.problems];
  if (!metricsMarked) {
    const capped = capModels(mapped.groups, (g) => g.parts.length);
    rejected += capped.rejected;
    problems.push(...capped.problems);
    for (const g of capped.kept) beats.push(await beatOf(ctx, connectionId, g, received));
    await recordGatewayBeats(ctx, beats);
  } else {
    // usage comes from the metrics; the spans say the gateway is alive
    const latest = mapped.groups.reduce((a, g) => Math.max(a, g.timeMs), 0);
    const requests = mapped.groups.reduce((a, g) => a + g.requests, 0);
    const errors = mapped.groups.reduce((a, g) => a + g.errors, 0);
    await livenessOnly(ctx, connectionId, latest, received, requests === 0 || errors < requests);
    problems.push(
      "token usage is counted from this connection's GenAI metrics; the spans' usage attributes were not counted again",
    );
  }
  otlpPoints.inc({ signal: "traces", outcome: "stored" }, metricsMarked ? 0 : mapped.used);
  otlpPoints.inc({ signal: "traces", outcome: "rejected" }, rejected);
  otlpPoints.inc({ signal: "traces", outcome: "ignored" }, mapped.ignored);
  return { rejected, message: describe(problems, mapped.ignored, "spans"), heartbeats: beats.length };
}

async function livenessOnly(
  ctx: AppContext,
  connectionId: string,
  timeMs: number,
  received: Date,
  available: boolean,
) {
  const ts = new Date(Math.min(timeMs, received.getTime()));
  const counted = reportGatewayHealth(ctx, {
    connectionId,
    heartbeatId: `ots_live_${timeMs}`,
    ts,
    received,
    available,
    reason: available ? null : "gateway_unhealthy",
    error: available ? null : "every GenAI operation of the trace export failed",
  });
  if (counted instanceof Promise) await counted;
}

/** Marks the connection as exporting token metrics (written at most every 5 minutes per process). */
async function noteTokenMetrics(ctx: AppContext, connectionId: string, nowMs: number): Promise<void> {
  const m = marks(ctx);
  const last = m.written.get(connectionId) ?? 0;
  if (nowMs - last < MARK_REFRESH_MS) return;
  await markTokenMetrics(ctx.stores.db, connectionId, new Date(nowMs));
  m.written.set(connectionId, nowMs);
  m.read.set(connectionId, { at: nowMs, markedAt: nowMs });
}

/** Whether the connection has ever exported GenAI token metrics (read at most every minute per process). */
async function exportsTokenMetrics(ctx: AppContext, connectionId: string, nowMs: number): Promise<boolean> {
  const m = marks(ctx);
  const known = m.read.get(connectionId);
  if (known && nowMs - known.at < MARK_TTL_MS) return known.markedAt !== null;
  const markedAt = await tokenMetricsMarkedAt(ctx.stores.db, connectionId);
  m.read.set(connectionId, { at: nowMs, markedAt });
  return markedAt !== null;
}
