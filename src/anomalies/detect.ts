import { randomUUID } from "node:crypto";
import type { AppContext } from "../core/context.js";
import { perApp } from "../core/context.js";
import { traced } from "../lib/tracing.js";
import { type IncidentTarget, openIncident, resolveIncident } from "../incidents/incidents.js";
import type { Queryable } from "../stores/relational/types.js";
import {
  type AnomalyMetric,
  against,
  type Band,
  band,
  DAY_MS,
  type Judgement,
  MIN_WINDOW_SAMPLES,
  MINUTE_MS,
  SUM_METRICS,
} from "./baselines.js";
import { BUCKET_MS, bucketStart, rollBuckets } from "./buckets.js";
import { LATE_MS, SETTLE_MS } from "./late.js";
import {
  countOpenAnomalies,
  deleteLateMarks,
  type LateMark,
  markRerolled,
  selectLateMarks,
  type DetectorConnection,
  type DetectorState,
  insertAnomaly,
  overlappingAnomaly,
  resolveAnomaly,
  saveDetectorProgress,
  selectDetectorConnections,
  selectDetectorProgress,
  selectDetectorStates,
  setAnomalyIncident,
  unresolvedAnomalyIncident,
  upsertDetectorState,
  upsertDetectorStates,
} from "./repository.js";
import { Agg, bucketRows, type MetricRow, sourceRows, valueOf } from "./windows.js";
import { anomalyEvaluations } from "../lib/metrics.js";

/**
 * The anomaly detector (docs/operations.md: Anomaly detection), one run at `ctx.now()`.
 *
 * It judges every metric of every connection once per minute: at each evaluation step `e` (a
 * minute boundary at least {@link SETTLE_MS} in the past) the window [e − W, e) (W =
 * ANOMALY_WINDOW_MINUTES, 15) and the short window [e − S, e) (S = ANOMALY_SHORT_WINDOW_MINUTES,
 * 5) are each compared with the same clock windows on each of the previous 7 days (hour-of-day
 * seasonality), by median and MAD (baselines.ts). A step is *above* when both windows are above
 * their bands: the long window says the deviation is significant, the short one that it is
 * still going on. An anomaly opens after N consecutive steps above (N = ANOMALY_WINDOWS, 6, more
 * than S, so a single bad minute, which stays in the short window for S steps, never opens one)
 * and resolves after N consecutive steps that are not (the short window back inside its band, or
 * no data). Observed windows are read per minute from the raw tables in the series store; the
 * baselines from 5-minute buckets rolled up as the data arrives (buckets.ts), both aggregated in
 * the store, so a step costs a few rows per connection.
 *
 * Each run judges every step since the last one it judged, up to ANOMALY_CATCH_UP_HOURS back
 * (the first run, after a restart or while no node ran it), so an anomaly under way is found on
 * the first run with its real `started_at`. One that began and ended within the steps a run
 * catches up on is recorded as resolved, without an incident or an e-mail. Late rows (late.ts)
 * have their buckets rolled up again, and a connection's minutes that have left every window
 * are judged again from a clean state; what that finds is recorded as resolved, unless an
 * anomaly of that metric already covers it. The first anomaly of a connection opens its
 * `anomaly` incident; the incident resolves when none of its anomalies is open.
 */
export interface DetectorRun {
  /** The last evaluation step judged (null: nothing new to judge). */
  judgedThrough: string | null;
  /** Evaluation steps judged (one a minute). */
  steps: number;
  /** Windows judged (connections × metrics × steps with enough data). */
  judged: number;
  opened: number;
  resolved: number;
  /** Anomalies found for the past (caught up or from late rows), recorded as resolved. */
  past: number;
  /** 5-minute buckets rolled up (rows written). */
  rolled: number;
}

interface Settings {
  window: number;
  short: number;
  n: number;
  threshold: number;
  minDays: number;
}

const METRIC_WORDS: Record<AnomalyMetric, { name: string; fmt: (v: number) => string }> = {
  response_time: { name: "p95 response time", fmt: (v) => `${Math.round(v)} ms` },
  failure_rate: { name: "check failure rate", fmt: (v) => `${(v * 100).toFixed(1)}%` },
  execution_failure_rate: { name: "execution failure rate", fmt: (v) => `${(v * 100).toFixed(1)}%` },
  gateway_latency: { name: "p95 gateway latency", fmt: (v) => `${Math.round(v)} ms` },
  token_volume: { name: "token volume", fmt: (v) => `${Math.round(v).toLocaleString("en-US")} tokens` },
  token_spend: { name: "spend", fmt: (v) => `$${v.toFixed(2)}` },
};

/** Steps a run judges from the whole fleet at once; more (a catch-up) go connection chunk by chunk. */
const LIVE_STEPS = 10;
/**
 * How long after a 5-minute bucket ends it is rolled up: the baselines are a day old or more, so
 * waiting costs nothing, and rows up to this late (or a node's clock this far behind) are in;
 * later ones are marked (late.ts) and rolled up again.
 */
const ROLL_LAG_MS = LATE_MS;
const CATCH_UP_CHUNK = 50;
/**
 * Baselines kept per 5-minute slot for this process's next runs, valid while it is the one that
 * judges (`judgedThrough` is what it saved last; another node's run in between clears them).
 */
const baselineCache = perApp(() => ({
  slots: new Map<number, Map<string, Baseline>>(),
  judgedThrough: null as number | null,
}));

interface Baseline {
  long: number[];
  short: number[];
  /** The bands of both windows, computed once per slot (the first step that needs them). */
  bands?: { long: Band | null; short: Band | null };
}

/** A baseline's bands, computed on first use and kept with it (and with the cache). */
function bandsOf(b: Baseline, metric: AnomalyMetric, s: Settings): NonNullable<Baseline["bands"]> {
  b.bands ??= {
    long: band(metric, b.long, s.threshold, s.minDays, s.window),
    short: band(metric, b.short, s.threshold, s.minDays, s.short),
  };
  return b.bands;
}

const RATE_METRICS: ReadonlySet<AnomalyMetric> = new Set(["failure_rate", "execution_failure_rate"]);
/**
 * Failures the short window must hold for a rate to count as above: with a check a minute, one
 * random failure in 5 minutes is 20 %, above a calm baseline's band; two in a row are not chance.
 */
const MIN_SHORT_FAILURES = 2;

/** What a step found for one connection and metric. */
interface Verdict {
  end: number;
  /**
   * Null: unknown, the window is above its band but the short window has no rows (a source that
   * reports less often than the short window is long): neither extends nor breaks a streak.
   */
  above: boolean | null;
  observed: number | null;
  j: Judgement | null;
  /** When above: the start of the run of minutes before `end` that are each above the short band. */
  since?: number;
}

/** An anomaly a run opens or records: `endedAt` set when it also ended within the run's steps. */
interface Episode {
  id: string;
  metric: AnomalyMetric;
  startedAt: Date;
  /** The step that opened it. */
  openedAt: number;
  observed: number;
  j: Judgement;
  endedAt: Date | null;
}

interface Outcome {
  state: DetectorState;
  changed: boolean;
  episodes: Episode[];
  /** An anomaly open before the run that resolved in it. */
  resolved: { id: string; endedAt: Date } | null;
}

const freshState = (connectionId: string, metric: string): DetectorState => ({
  connection_id: connectionId,
  metric,
  last_window: new Date(0),
  over_streak: 0,
  under_streak: 0,
  streak_started_at: null,
  anomaly_id: null,
});

export const detectAnomalies = traced(
  "vigil.anomalies.detect",
  {
    result: (run) => ({
      "vigil.anomalies.steps": run.steps,
      "vigil.anomalies.judged": run.judged,
      "vigil.anomalies.opened": run.opened,
      "vigil.anomalies.resolved": run.resolved,
    }),
  },
  detect,
);

async function detect(ctx: AppContext): Promise<DetectorRun> {
  const db = ctx.stores.db;
  const at = ctx.now();
  const c = ctx.config.anomalies;
  const s: Settings = {
    window: c.windowMinutes,
    short: c.shortWindowMinutes,
    n: c.windows,
    threshold: c.threshold,
    minDays: c.minBaselineDays,
  };
  const settled = Math.floor((at.getTime() - SETTLE_MS) / MINUTE_MS) * MINUTE_MS;
  const catchUpFrom = settled - Math.max(1, c.catchUpHours * 60) * MINUTE_MS;
  const run: DetectorRun = {
    judgedThrough: null,
    steps: 0,
    judged: 0,
    opened: 0,
    resolved: 0,
    past: 0,
    rolled: 0,
  };

  const progress = await selectDetectorProgress(db);
  // A clock that went back (or progress saved by a node whose clock ran ahead): judged steps and
  // rolled buckets in the future are taken back to now, so they are judged and rolled up again
  // with the data they will really hold, instead of being skipped until the clock catches up.
  if (progress.judgedThrough && progress.judgedThrough.getTime() > settled) {
    ctx.log.warn(
      { job: "anomaly-detector", judgedThrough: progress.judgedThrough.toISOString(), now: at.toISOString() },
      "anomaly detector: judged up to a time still ahead of this clock (a clock that went back?); judging again from now",
    );
    progress.judgedThrough = new Date(settled);
  }
  const rollUntil = bucketStart(at.getTime() - ROLL_LAG_MS);
  if (progress.rolledThrough && progress.rolledThrough.getTime() > rollUntil)
    progress.rolledThrough = new Date(rollUntil);
  const cache = baselineCache(ctx);
  if ((progress.judgedThrough?.getTime() ?? null) !== cache.judgedThrough) cache.slots.clear();
  const marks = await selectLateMarks(db, at);
  await ctx.stores.series.waitVisible(); // every row marked or acknowledged before is readable

  // 1. the 5-minute buckets: new ones (progress saved an hour at a time, so a first run over a
  // week that stops halfway goes on where it stopped), then those already rolled that received
  // late rows
  const oldest = bucketStart(catchUpFrom - s.window * MINUTE_MS - 7 * DAY_MS);
  const rolledBefore = progress.rolledThrough ? Math.max(progress.rolledThrough.getTime(), oldest) : oldest;
  let rolledThrough = new Date(Math.max(rolledBefore, progress.rolledThrough?.getTime() ?? 0));
  if (rollUntil > rolledBefore)
    run.rolled += await rollBuckets(ctx, new Date(rolledBefore), new Date(rollUntil), {
      saved: async (through) => {
        rolledThrough = through;
        await saveDetectorProgress(db, { judgedThrough: progress.judgedThrough, rolledThrough: through });
      },
    });
  const reroll = new Map<number, Set<string>>();
  const useless = oldest; // a bucket older than any baseline a judgement reads
  for (const m of marks) {
    const b = bucketStart(m.minute.getTime());
    if (b + BUCKET_MS > rolledBefore || b < useless || m.rerolled) continue; // rolled with its late rows, or not read
    reroll.set(b, (reroll.get(b) ?? new Set()).add(m.connection_id));
  }
  for (const [b, ids] of reroll)
    for (const part of chunk([...ids], 1000))
      run.rolled += await rollBuckets(ctx, new Date(b), new Date(b + BUCKET_MS), { connections: part });
  // cached baselines read buckets a day old or older
  if ([...reroll.keys()].some((b) => b < at.getTime() - DAY_MS + s.window * MINUTE_MS)) cache.slots.clear();
  await markRerolled(
    db,
    marks.filter((m) => reroll.has(bucketStart(m.minute.getTime()))),
  );

  // 2. the steps not judged yet
  const judgedBefore = Math.max(progress.judgedThrough?.getTime() ?? -Infinity, catchUpFrom);
  const ends: number[] = [];
  for (let e = judgedBefore + MINUTE_MS; e <= settled; e += MINUTE_MS) ends.push(e);
  const connections = await selectDetectorConnections(db);
  if (ends.length > 0) {
    const states = new Map<string, DetectorState>();
    for (const st of await selectDetectorStates(db)) states.set(`${st.connection_id}/${st.metric}`, st);
    await judgeSteps(ctx, s, connections, ends, states, run, at);
    run.steps = ends.length;
    run.judgedThrough = new Date(settled).toISOString();
  }

  // 3. late rows, once their minute has left every window and its hysteresis: that connection's
  // steps around them judged again; until then the marks wait (the short window may never have
  // held them)
  const judgedThrough = ends.length > 0 ? new Date(settled) : progress.judgedThrough;
  const leftBy = (judgedThrough?.getTime() ?? -Infinity) - (s.window + s.n) * MINUTE_MS;
  const again = new Map<string, number>(); // per connection, its oldest late minute
  const done: LateMark[] = [];
  for (const m of marks) {
    const t = m.minute.getTime();
    if (t >= leftBy && t >= oldest) continue; // still to be judged live, or to wait
    done.push(m);
    if (t < catchUpFrom) continue; // older than anything the detector judges
    again.set(m.connection_id, Math.min(again.get(m.connection_id) ?? t, t));
  }
  if (again.size > 0 && judgedThrough) await judgeAgain(ctx, s, connections, again, judgedThrough, run, at);

  await saveDetectorProgress(db, { judgedThrough, rolledThrough });
  cache.judgedThrough = judgedThrough?.getTime() ?? null;
  await deleteLateMarks(db, done);
  if (run.opened || run.resolved || run.past)
    ctx.log.info({ job: "anomaly-detector", ...run }, "anomalies detected");
  anomalyEvaluations.inc(run.judged);
  return run;
}

/** Judges `ends` for every connection, moving their states on, and records what that changes. */
async function judgeSteps(
  ctx: AppContext,
  s: Settings,
  connections: DetectorConnection[],
  ends: number[],
  states: Map<string, DetectorState>,
  run: DetectorRun,
  at: Date,
): Promise<void> {
  const byId = new Map(connections.map((c) => [c.id, c]));
  const live = ends.length <= LIVE_STEPS;
  const chunks = live
    ? [undefined]
    : chunk(
        connections.map((c) => c.id),
        CATCH_UP_CHUNK,
      );
  const quiet: DetectorState[] = [];
  for (const ids of chunks) {
    const keys = new Set<string>();
    const inChunk = ids ? new Set(ids) : null;
    if (inChunk) for (const k of states.keys()) if (inChunk.has(k.slice(0, k.lastIndexOf("/")))) keys.add(k);
    if (!ids) for (const k of states.keys()) keys.add(k);
    const verdicts = await verdictsFor(ctx, s, ends, ids, keys, live, run);
    const outcomes = new Map<string, Outcome[]>();
    for (const [key, vs] of verdicts) {
      const slash = key.lastIndexOf("/");
      const connectionId = key.slice(0, slash);
      const metric = key.slice(slash + 1) as AnomalyMetric;
      if (!byId.has(connectionId)) continue; // data of a deleted connection
      const o = step(states.get(key) ?? freshState(connectionId, metric), vs, s);
      if (!o.changed) continue;
      const list = outcomes.get(connectionId) ?? [];
      list.push(o);
      outcomes.set(connectionId, list);
    }
    for (const [connectionId, list] of outcomes) {
      const conn = byId.get(connectionId) as DetectorConnection;
      if (!list.some((o) => o.episodes.length > 0 || o.resolved)) {
        quiet.push(...list.map((o) => o.state));
        continue;
      }
      const done = await ctx.stores.db.transaction((tx) => record(ctx, tx, conn, list, s, at));
      run.opened += done.opened;
      run.resolved += done.resolved;
      run.past += done.past;
    }
  }
  await upsertDetectorStates(ctx.stores.db, quiet);
}

/**
 * A connection's past minutes judged again from a clean state after late rows reached them
 * (steps up to `judgedThrough`): each anomaly found that also ended there, and that no anomaly
 * of the metric already covers, is recorded as resolved. One still going at the last judged
 * step is the live state's to find.
 */
async function judgeAgain(
  ctx: AppContext,
  s: Settings,
  connections: DetectorConnection[],
  oldest: Map<string, number>,
  judgedThrough: Date,
  run: DetectorRun,
  at: Date,
): Promise<void> {
  const byId = new Map(connections.map((c) => [c.id, c]));
  // one pass from the oldest late minute of the connections concerned, chunk by chunk
  const ids = [...oldest.keys()].filter((id) => byId.has(id));
  for (const part of chunk(ids, CATCH_UP_CHUNK)) {
    const from = Math.min(...part.map((id) => oldest.get(id) as number));
    const first = from + MINUTE_MS - s.n * MINUTE_MS; // a streak the late rows complete
    // to the last step judged: the rows after the late ones (on time) belong to the same episode
    const last = judgedThrough.getTime();
    const ends: number[] = [];
    for (let e = first; e <= last; e += MINUTE_MS) ends.push(e);
    if (ends.length === 0) continue;
    const verdicts = await verdictsFor(ctx, s, ends, part, new Set(), false, null);
    for (const [key, vs] of verdicts) {
      const slash = key.lastIndexOf("/");
      const connectionId = key.slice(0, slash);
      const metric = key.slice(slash + 1) as AnomalyMetric;
      const conn = byId.get(connectionId);
      if (!conn) continue;
      const o = step(freshState(connectionId, metric), vs, s);
      const ended = o.episodes.filter((e) => e.endedAt);
      if (ended.length === 0) continue;
      const fresh: Episode[] = [];
      for (const e of ended)
        if (!(await overlappingAnomaly(ctx.stores.db, connectionId, metric, e.startedAt, e.endedAt as Date)))
          fresh.push(e);
      if (fresh.length === 0) continue;
      await ctx.stores.db.transaction(async (tx) => {
        for (const e of fresh) await insertAnomaly(tx, anomalyRow(connectionId, e, s, at));
      });
      run.past += fresh.length;
    }
  }
}

/**
 * Every step's verdict for each connection and metric that has data in the windows or a state
 * in `keys`: observed windows from the raw tables by minute, baselines from the 5-minute buckets.
 */
async function verdictsFor(
  ctx: AppContext,
  s: Settings,
  ends: number[],
  ids: string[] | undefined,
  keys: Set<string>,
  cache: boolean,
  run: DetectorRun | null,
): Promise<Map<string, Verdict[]>> {
  const series = ctx.stores.series;
  const first = ends[0] as number;
  const last = ends[ends.length - 1] as number;
  // One step (a live run): each window summed in the store, a row per connection, metric and
  // bin. Several: the minutes of all of them, slid over here.
  const single = ends.length === 1;
  const observed = group(
    await sourceRows(series, {
      bucket: single ? "all" : "minute",
      since: new Date(first - s.window * MINUTE_MS),
      until: new Date(last),
      connections: ids,
    }),
  );
  const observedShort = single
    ? group(
        await sourceRows(series, {
          bucket: "all",
          since: new Date(first - s.short * MINUTE_MS),
          until: new Date(last),
          connections: ids,
        }),
      )
    : null;
  for (const k of observed.keys()) keys.add(k);
  const baselines = await baselinesFor(ctx, s, ends, ids, cache);
  for (const perKey of baselines.values()) for (const k of perKey.keys()) keys.add(k);

  const out = new Map<string, Verdict[]>();
  const sinceOf: { key: string; v: Verdict; high: number }[] = [];
  for (const key of keys) {
    const metric = key.slice(key.lastIndexOf("/") + 1) as AnomalyMetric;
    const rows = observed.get(key) ?? [];
    const long = new Agg();
    const short = new Agg();
    let added = 0;
    let leftLong = 0;
    let leftShort = 0;
    const vs: Verdict[] = [];
    for (const end of ends) {
      if (observedShort) {
        for (const r of rows) long.add(r);
        for (const r of observedShort.get(key) ?? []) short.add(r);
      } else {
        while (added < rows.length && (rows[added] as MetricRow).ts.getTime() < end) {
          long.add(rows[added] as MetricRow);
          short.add(rows[added] as MetricRow);
          added++;
        }
        while (leftLong < added && (rows[leftLong] as MetricRow).ts.getTime() < end - s.window * MINUTE_MS)
          long.add(rows[leftLong++] as MetricRow, -1);
        while (leftShort < added && (rows[leftShort] as MetricRow).ts.getTime() < end - s.short * MINUTE_MS)
          short.add(rows[leftShort++] as MetricRow, -1);
      }
      const base = baselines.get(bucketStart(end))?.get(key);
      const bands = base ? bandsOf(base, metric, s) : { long: null, short: null };
      const vLong = valueOf(metric, long);
      const vShort = valueOf(metric, short);
      const jLong =
        vLong && vLong.samples >= MIN_WINDOW_SAMPLES[metric] && bands.long
          ? against(bands.long, vLong.value)
          : null;
      const shortAbove =
        !!vShort &&
        !!bands.short &&
        vShort.value > bands.short.high &&
        (!RATE_METRICS.has(metric) || short.total >= MIN_SHORT_FAILURES);
      if (jLong && run) run.judged++;
      const above = jLong?.outside && !vShort ? null : !!(jLong?.outside && shortAbove);
      const v: Verdict = {
        end,
        above,
        observed: jLong ? (vLong as { value: number }).value : null,
        j: jLong,
      };
      if (above && bands.short)
        if (observedShort) sinceOf.push({ key, v, high: bands.short.high });
        else v.since = deviatingSince(metric, rows, added, end, s.short, bands.short.high);
      vs.push(v);
    }
    out.set(key, vs);
  }
  // where the deviations above began, from the short window's minutes of just those connections
  if (sinceOf.length > 0) {
    const ids = [...new Set(sinceOf.map((x) => x.key.slice(0, x.key.lastIndexOf("/"))))];
    for (const part of chunk(ids, 1000)) {
      const minutes = group(
        await sourceRows(series, {
          bucket: "minute",
          since: new Date(first - s.short * MINUTE_MS),
          until: new Date(last),
          connections: part,
        }),
      );
      for (const x of sinceOf) {
        const rows = minutes.get(x.key);
        if (!rows) continue;
        const metric = x.key.slice(x.key.lastIndexOf("/") + 1) as AnomalyMetric;
        x.v.since = deviatingSince(metric, rows, rows.length, x.v.end, s.short, x.high);
      }
    }
  }
  return out;
}

/**
 * Where a deviation began: walking back minute by minute from `end` through the short window, the
 * earliest of the consecutive minutes whose own value is above the short window's band (a sum
 * counted at the short window's rate). `rows[0..added)` are the connection's rows before `end`.
 */
function deviatingSince(
  metric: AnomalyMetric,
  rows: MetricRow[],
  added: number,
  end: number,
  short: number,
  high: number,
): number {
  const scale = SUM_METRICS.has(metric) ? short : 1;
  let since = end - MINUTE_MS;
  let i = added - 1;
  for (let m = end - MINUTE_MS; m >= end - short * MINUTE_MS; m -= MINUTE_MS) {
    const minute = new Agg();
    while (i >= 0 && (rows[i] as MetricRow).ts.getTime() >= m) minute.add(rows[i--] as MetricRow);
    const v = valueOf(metric, minute);
    if (!v || v.value * scale <= high) break;
    since = m;
  }
  return since;
}

/**
 * Per 5-minute slot of the steps, each connection and metric's baseline values: the long and the
 * short window ending at the slot's start on each of the 7 previous days, those with enough data.
 * The windows end on the slot's start (a step's own clock time rounded down to 5 minutes).
 */
async function baselinesFor(
  ctx: AppContext,
  s: Settings,
  ends: number[],
  ids: string[] | undefined,
  cache: boolean,
): Promise<Map<number, Map<string, Baseline>>> {
  const slots = [...new Set(ends.map(bucketStart))];
  const cached = baselineCache(ctx).slots;
  const out = new Map<number, Map<string, Baseline>>();
  const missing = slots.filter((f) => {
    const hit = cache ? cached.get(f) : undefined;
    if (hit) out.set(f, hit);
    return !hit;
  });
  if (missing.length === 0) return out;
  const lo = Math.min(...missing);
  const hi = Math.max(...missing);
  for (const f of missing) out.set(f, new Map());
  for (let d = 1; d <= 7; d++) {
    const rows = group(
      await bucketRows(ctx.stores.series, {
        since: new Date(lo - d * DAY_MS - s.window * MINUTE_MS),
        until: new Date(hi - d * DAY_MS),
        connections: ids,
      }),
    );
    for (const [key, list] of rows) {
      const metric = key.slice(key.lastIndexOf("/") + 1) as AnomalyMetric;
      // the key's buckets by start: a window is the few buckets before its end
      const at = new Map<number, MetricRow[]>();
      for (const r of list) {
        const t = r.ts.getTime();
        const b = at.get(t);
        if (b) b.push(r);
        else at.set(t, [r]);
      }
      for (const f of missing) {
        const end = f - d * DAY_MS;
        const long = new Agg();
        const short = new Agg();
        for (let t = end - s.window * MINUTE_MS; t < end; t += BUCKET_MS)
          for (const r of at.get(t) ?? []) {
            long.add(r);
            if (t >= end - s.short * MINUTE_MS) short.add(r);
          }
        const perKey = out.get(f) as Map<string, Baseline>;
        const b = perKey.get(key) ?? { long: [], short: [] };
        const vLong = valueOf(metric, long);
        const vShort = valueOf(metric, short);
        if (vLong && vLong.samples >= MIN_WINDOW_SAMPLES[metric]) b.long.push(vLong.value);
        if (vShort) b.short.push(vShort.value);
        perKey.set(key, b);
      }
    }
  }
  if (cache) {
    for (const f of missing) cached.set(f, out.get(f) as Map<string, Baseline>);
    for (const f of cached.keys()) if (f < Math.max(...slots) - BUCKET_MS) cached.delete(f);
  }
  return out;
}

/** The state machine of one connection and metric over a run's verdicts. */
function step(prev: DetectorState, verdicts: Verdict[], s: Settings): Outcome {
  const st: DetectorState = { ...prev };
  const episodes: Episode[] = [];
  let resolved: Outcome["resolved"] = null;
  let judged = false;
  let previous = st.last_window.getTime();
  for (const v of verdicts) {
    if (v.end <= st.last_window.getTime()) continue; // judged before a crash stopped that run
    judged = true;
    // steps that were never judged (a gap longer than the catch-up) break a streak
    if (previous > 0 && v.end - previous > MINUTE_MS && st.over_streak > 0) {
      st.over_streak = 0;
      st.streak_started_at = null;
    }
    previous = v.end;
    if (v.above === null) continue;
    if (v.above && v.j && v.observed !== null) {
      st.under_streak = 0;
      if (st.anomaly_id) continue;
      st.over_streak++;
      if (st.over_streak === 1) st.streak_started_at = new Date(v.since ?? v.end - MINUTE_MS);
      if (st.over_streak >= s.n) {
        const e: Episode = {
          id: randomUUID(),
          metric: st.metric as AnomalyMetric,
          startedAt: st.streak_started_at ?? new Date(v.end - MINUTE_MS),
          openedAt: v.end,
          observed: v.observed,
          j: v.j,
          endedAt: null,
        };
        episodes.push(e);
        st.anomaly_id = e.id;
        st.over_streak = 0;
        st.streak_started_at = null;
      }
    } else {
      st.over_streak = 0;
      st.streak_started_at = null;
      if (!st.anomaly_id) continue;
      st.under_streak++;
      if (st.under_streak < s.n) continue;
      // the last step above the band ended where the run of steps back inside began
      const endedAt = new Date(v.end - st.under_streak * MINUTE_MS);
      const mine = episodes.find((e) => e.id === st.anomaly_id);
      if (mine) mine.endedAt = endedAt;
      else resolved = { id: st.anomaly_id, endedAt };
      st.anomaly_id = null;
      st.under_streak = 0;
    }
  }
  const last = verdicts[verdicts.length - 1];
  if (judged && last) st.last_window = new Date(last.end);
  const changed =
    st.over_streak !== prev.over_streak ||
    st.under_streak !== prev.under_streak ||
    st.streak_started_at?.getTime() !== prev.streak_started_at?.getTime() ||
    st.anomaly_id !== prev.anomaly_id ||
    episodes.length > 0;
  return { state: st, changed, episodes, resolved };
}

function anomalyRow(connectionId: string, e: Episode, s: Settings, at: Date) {
  return {
    id: e.id,
    connectionId,
    metric: e.metric,
    detectedAt: at,
    startedAt: e.startedAt,
    endedAt: e.endedAt ?? undefined,
    windowStart: new Date(e.openedAt - s.window * MINUTE_MS),
    windowEnd: new Date(e.openedAt),
    observed: e.observed,
    baselineMean: e.j.mean,
    baselineStddev: e.j.stddev,
    baselineMedian: e.j.median,
    baselineMad: e.j.mad,
    bandLow: e.j.low,
    bandHigh: e.j.high,
    score: e.j.score,
  };
}

/**
 * Writes one connection's outcomes in one transaction: anomalies found for the past (resolved,
 * no incident), anomalies that resolved, new open anomalies with their incident (opened or
 * joined: its notification is the e-mail), the incident resolved when no anomaly stays open, and
 * the states.
 */
async function record(
  ctx: AppContext,
  tx: Queryable,
  c: DetectorConnection,
  outcomes: Outcome[],
  s: Settings,
  at: Date,
): Promise<{ opened: number; resolved: number; past: number }> {
  const target: IncidentTarget = {
    connectionId: c.id,
    connectionName: c.service_name,
    userId: c.user_id,
    organizationId: c.organization_id,
  };
  let past = 0;
  const opened: Episode[] = [];
  const resolved: string[] = [];
  // resolutions first: an anomaly found after one that resolved must not be taken as covered by it
  for (const o of outcomes)
    if (o.resolved) {
      await resolveAnomaly(tx, o.resolved.id, at, o.resolved.endedAt);
      resolved.push(o.resolved.id);
    }
  for (const o of outcomes) {
    for (const e of o.episodes) {
      // one already recorded for that time (found from late rows, or by a run that overlapped
      // this one) is not recorded again
      const other = await overlappingAnomaly(
        tx,
        c.id,
        e.metric,
        e.startedAt,
        e.endedAt ?? new Date(Date.UTC(9999, 0)),
      );
      if (other) {
        // an open one is this anomaly already: the state follows it
        if (o.state.anomaly_id === e.id) o.state.anomaly_id = other.status === "open" ? other.id : null;
        continue;
      }
      if (e.endedAt) past++;
      else opened.push(e);
      await insertAnomaly(tx, anomalyRow(c.id, e, s, at));
    }
    await upsertDetectorState(tx, o.state);
  }
  for (const e of opened) {
    const words = METRIC_WORDS[e.metric];
    const summary =
      `${words.name} ${words.fmt(e.observed)} in the ${s.window} minutes to ${new Date(e.openedAt).toISOString()}, ` +
      `usually ${words.fmt(e.j.median)} at this time of day (band up to ${words.fmt(e.j.high)}), since ${e.startedAt.toISOString()}`;
    const incident =
      (await openIncident(tx, target, {
        kind: "anomaly",
        title: `${c.service_name}: unusual ${words.name}`,
        detail: {
          summary,
          anomaly_id: e.id,
          metric: e.metric,
          observed: e.observed,
          baseline_median: e.j.median,
          band_high: e.j.high,
          score: e.j.score,
          started_at: e.startedAt.toISOString(),
          window_start: new Date(e.openedAt - s.window * MINUTE_MS).toISOString(),
          window_end: new Date(e.openedAt).toISOString(),
        },
        at,
        publicUrl: ctx.config.publicUrl,
        anomalyId: e.id,
      })) ?? (await unresolvedAnomalyIncident(tx, c.id));
    if (incident) await setAnomalyIncident(tx, e.id, incident);
  }
  if (resolved.length > 0 && (await countOpenAnomalies(tx, c.id)) === 0)
    await resolveIncident(tx, target, {
      kind: "anomaly",
      detail: { anomaly_ids: resolved },
      at,
      publicUrl: ctx.config.publicUrl,
      reason: `back inside the baseline band for ${s.n} consecutive minutes`,
      automatic: true,
      anomalyId: resolved.length === 1 ? resolved[0] : null,
    });
  return { opened: opened.length, resolved: resolved.length, past };
}

function group(rows: MetricRow[]): Map<string, MetricRow[]> {
  const out = new Map<string, MetricRow[]>();
  for (const r of rows) {
    const key = `${r.connection_id}/${r.metric}`;
    const list = out.get(key);
    if (list) list.push(r);
    else out.set(key, [r]);
  }
  for (const list of out.values()) list.sort((a, b) => a.ts.getTime() - b.ts.getTime());
  return out;
}

function chunk<T>(xs: T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < xs.length; i += size) out.push(xs.slice(i, i + size));
  return out;
}
