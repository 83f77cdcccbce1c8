import type { AppContext } from "../core/context.js";
import { type IncidentTarget, openIncident, resolveIncident } from "../incidents/incidents.js";
import type { Queryable } from "../stores/relational/types.js";
import {
  ANOMALY_METRICS,
  type AnomalyMetric,
  HOUR_MS,
  type HourValue,
  hourValues,
  type Judgement,
  judge,
  MIN_HOUR_SAMPLES,
} from "./baselines.js";
import {
  countOpenAnomalies,
  type DetectorConnection,
  type DetectorState,
  insertAnomaly,
  resolveAnomaly,
  selectDetectorConnections,
  selectDetectorStates,
  setAnomalyIncident,
  unresolvedAnomalyIncident,
  upsertDetectorState,
  upsertDetectorStates,
} from "./repository.js";
import pLimit from "p-limit";

/**
 * The anomaly detector (docs/operations.md: Anomaly detection), one run at `ctx.now()`.
 *
 * The window is the last UTC calendar hour that ended at least `SETTLE_MS` ago; it is compared
 * with the same hour of day on each of the previous 7 days (hour-of-day seasonality: a nightly
 * batch is in its own baseline). Each hour is aggregated per connection in the series store
 * (baselines.ts); the median and MAD of the baseline hours that have enough rows make the band
 * `median ± threshold · max(1.4826 · MAD, floor)`. A window is judged once per connection and
 * metric (runs every ANOMALY_INTERVAL_SECONDS only make sure each hour is judged soon after it
 * ends). Hysteresis: an anomaly opens after `windows` consecutive windows above the band and
 * resolves after as many back inside it (or without data). The first anomaly of a connection
 * opens its `anomaly` incident; the incident resolves when none of its anomalies is open.
 */
export const SETTLE_MS = 2 * 60_000;

export interface DetectorRun {
  window: { start: string; end: string };
  judged: number;
  opened: number;
  resolved: number;
}

/** Start of the window a run at `now` judges. */
export function windowStart(now: Date): Date {
  return new Date(Math.floor((now.getTime() - SETTLE_MS) / HOUR_MS) * HOUR_MS - HOUR_MS);
}

const METRIC_WORDS: Record<AnomalyMetric, { name: string; fmt: (v: number) => string }> = {
  response_time: { name: "p95 response time", fmt: (v) => `${Math.round(v)} ms` },
  failure_rate: { name: "check failure rate", fmt: (v) => `${(v * 100).toFixed(1)}%` },
  execution_failure_rate: { name: "execution failure rate", fmt: (v) => `${(v * 100).toFixed(1)}%` },
  gateway_latency: { name: "p95 gateway latency", fmt: (v) => `${Math.round(v)} ms` },
  token_volume: { name: "tokens per hour", fmt: (v) => `${Math.round(v).toLocaleString("en-US")} tokens` },
  token_spend: { name: "spend per hour", fmt: (v) => `$${v.toFixed(2)}` },
};

interface Verdict {
  metric: AnomalyMetric;
  observed: number | null;
  j: Judgement | null;
}

export async function detectAnomalies(ctx: AppContext): Promise<DetectorRun> {
  const db = ctx.stores.db;
  const at = ctx.now();
  const start = windowStart(at);
  const end = new Date(start.getTime() + HOUR_MS);
  const { windows, threshold, minBaselineHours } = ctx.config.anomalies;
  const run: DetectorRun = {
    window: { start: start.toISOString(), end: end.toISOString() },
    judged: 0,
    opened: 0,
    resolved: 0,
  };

  const states = new Map<string, DetectorState>();
  for (const s of await selectDetectorStates(db)) states.set(`${s.connection_id}/${s.metric}`, s);

  // per metric: the window and the 7 baseline hours, each one aggregate over all connections
  const hours = [start, ...[1, 2, 3, 4, 5, 6, 7].map((d) => new Date(start.getTime() - d * 24 * HOUR_MS))];
  // two hours at a time, each one statement at a time: a run holds at most two store connections
  const limit = pLimit(2);
  const perHour = await Promise.all(hours.map((h) => limit(() => hourValues(ctx.stores.series, h))));
  const values = new Map<AnomalyMetric, Map<string, HourValue>[]>(
    ANOMALY_METRICS.map((m) => [m, perHour.map((h) => h.get(m) ?? new Map<string, HourValue>())]),
  );

  const quiet: DetectorState[] = [];
  for (const c of await selectDetectorConnections(db)) {
    const verdicts: Verdict[] = [];
    for (const metric of ANOMALY_METRICS) {
      const state = states.get(`${c.id}/${metric}`);
      if (state && state.last_window.getTime() >= start.getTime()) continue; // judged already
      const [now, ...baseline] = values.get(metric) ?? [];
      const min = MIN_HOUR_SAMPLES[metric];
      const enough = (h: HourValue | undefined): h is HourValue => !!h && h.samples >= min;
      const observed = now?.get(c.id);
      const base = baseline
        .map((m) => m.get(c.id))
        .filter(enough)
        .map((h) => h.value);
      if (!enough(observed) && base.length === 0 && !state?.anomaly_id) continue; // nothing to judge
      const j = enough(observed) ? judge(metric, observed.value, base, threshold, minBaselineHours) : null;
      verdicts.push({ metric, observed: enough(observed) ? observed.value : null, j });
    }
    if (verdicts.length === 0) continue;
    run.judged += verdicts.length;
    // Most connections only move their streaks: their states are written together at the end.
    // One that opens or resolves an anomaly gets a transaction of its own (anomaly, incident,
    // states together).
    if (!verdicts.some((v) => changes(states.get(`${c.id}/${v.metric}`), v, windows))) {
      for (const v of verdicts) {
        const s = nextState(states.get(`${c.id}/${v.metric}`), c.id, v, start);
        states.set(`${c.id}/${v.metric}`, s);
        quiet.push(s);
      }
      continue;
    }
    const changed = await db.transaction((tx) =>
      applyVerdicts(ctx, tx, c, verdicts, states, { start, end, at, windows }),
    );
    run.opened += changed.opened;
    run.resolved += changed.resolved;
  }
  await upsertDetectorStates(db, quiet);
  if (run.opened || run.resolved) ctx.log.info({ job: "anomaly-detector", ...run }, "anomalies detected");
  return run;
}

/** Whether a verdict opens an anomaly (the streak reaches `windows`) or resolves one. */
function changes(prev: DetectorState | undefined, v: Verdict, windows: number): boolean {
  if (v.j?.outside && v.observed !== null)
    return !prev?.anomaly_id && (prev?.over_streak ?? 0) + 1 >= windows;
  return !!prev?.anomaly_id && prev.under_streak + 1 >= windows;
}

/** The state after a verdict that neither opens nor resolves an anomaly. */
function nextState(
  prev: DetectorState | undefined,
  connectionId: string,
  v: Verdict,
  start: Date,
): DetectorState {
  const s: DetectorState = prev
    ? { ...prev, last_window: start }
    : {
        connection_id: connectionId,
        metric: v.metric,
        last_window: start,
        over_streak: 0,
        under_streak: 0,
        streak_started_at: null,
        anomaly_id: null,
      };
  if (v.j?.outside && v.observed !== null) {
    s.over_streak++;
    s.under_streak = 0;
    if (s.over_streak === 1) s.streak_started_at = start;
  } else {
    s.over_streak = 0;
    s.streak_started_at = null;
    if (s.anomaly_id) s.under_streak++;
  }
  return s;
}

async function applyVerdicts(
  ctx: AppContext,
  tx: Queryable,
  c: DetectorConnection,
  verdicts: Verdict[],
  states: Map<string, DetectorState>,
  w: { start: Date; end: Date; at: Date; windows: number },
): Promise<{ opened: number; resolved: number }> {
  const target: IncidentTarget = {
    connectionId: c.id,
    connectionName: c.service_name,
    userId: c.user_id,
    organizationId: c.organization_id,
  };
  const opened: { id: string; summary: string; v: Verdict }[] = [];
  const resolved: string[] = [];
  for (const v of verdicts) {
    const prev = states.get(`${c.id}/${v.metric}`);
    const s: DetectorState = prev
      ? { ...prev, last_window: w.start }
      : {
          connection_id: c.id,
          metric: v.metric,
          last_window: w.start,
          over_streak: 0,
          under_streak: 0,
          streak_started_at: null,
          anomaly_id: null,
        };
    if (v.j?.outside && v.observed !== null) {
      s.over_streak++;
      s.under_streak = 0;
      if (s.over_streak === 1) s.streak_started_at = w.start;
      if (!s.anomaly_id && s.over_streak >= w.windows) {
        const words = METRIC_WORDS[v.metric];
        s.anomaly_id = await insertAnomaly(tx, {
          connectionId: c.id,
          metric: v.metric,
          detectedAt: w.at,
          startedAt: s.streak_started_at ?? w.start,
          windowStart: w.start,
          windowEnd: w.end,
          observed: v.observed,
          baselineMean: v.j.mean,
          baselineStddev: v.j.stddev,
          baselineMedian: v.j.median,
          baselineMad: v.j.mad,
          bandLow: v.j.low,
          bandHigh: v.j.high,
          score: v.j.score,
        });
        opened.push({
          id: s.anomaly_id,
          v,
          summary:
            `${words.name} ${words.fmt(v.observed)} in the hour from ${w.start.toISOString()}, ` +
            `usually ${words.fmt(v.j.median)} at this hour (band up to ${words.fmt(v.j.high)})`,
        });
      }
    } else {
      s.over_streak = 0;
      s.streak_started_at = null;
      if (s.anomaly_id) {
        s.under_streak++;
        if (s.under_streak >= w.windows) {
          // the last window above the band ended where the run of windows back inside began
          const endedAt = new Date(w.end.getTime() - s.under_streak * HOUR_MS);
          await resolveAnomaly(tx, s.anomaly_id, w.at, endedAt);
          resolved.push(s.anomaly_id);
          s.anomaly_id = null;
          s.under_streak = 0;
        }
      }
    }
    await upsertDetectorState(tx, s);
    states.set(`${c.id}/${v.metric}`, s);
  }

  for (const o of opened) {
    const incident =
      (await openIncident(tx, target, {
        kind: "anomaly",
        title: `${c.service_name}: unusual ${METRIC_WORDS[o.v.metric].name}`,
        detail: {
          summary: o.summary,
          anomaly_id: o.id,
          metric: o.v.metric,
          observed: o.v.observed,
          baseline_median: o.v.j?.median,
          band_high: o.v.j?.high,
          score: o.v.j?.score,
          window_start: w.start.toISOString(),
          window_end: w.end.toISOString(),
        },
        at: w.at,
        publicUrl: ctx.config.publicUrl,
      })) ?? (await unresolvedAnomalyIncident(tx, c.id));
    if (incident) await setAnomalyIncident(tx, o.id, incident);
  }
  if (resolved.length > 0 && (await countOpenAnomalies(tx, c.id)) === 0)
    await resolveIncident(tx, target, {
      kind: "anomaly",
      detail: { anomaly_ids: resolved },
      at: w.at,
      publicUrl: ctx.config.publicUrl,
      reason: `back inside the baseline band for ${w.windows} consecutive hours`,
      automatic: true,
    });
  return { opened: opened.length, resolved: resolved.length };
}
