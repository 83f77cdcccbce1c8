import { hash } from "node:crypto";
import { LIMITS } from "../core/limits.js";
import type {
  Attributes,
  AttributeValue,
  HistogramDataPoint,
  NumberDataPoint,
  OtlpMetricsRequest,
  OtlpTracesRequest,
} from "./types.js";

/**
 * What Vigil reads of OpenTelemetry's GenAI semantic conventions (docs/otlp.md has the table):
 * token usage, requests, errors and latency per gateway instance and model, from metrics
 * (`gen_ai.client.token.usage` and the newer `gen_ai.client.inference.usage.*` counters, with
 * `gen_ai.client.operation.duration` / `gen_ai.client.inference.duration`) or from spans (the
 * `gen_ai.usage.*` attributes, v1.36-and-earlier names and current ones alike).
 *
 * This module is pure: it turns a decoded export request into points and usage groups. Turning a
 * cumulative point into an increment needs the series' previous point (cumulative.ts); the ingest
 * (ingest.ts) stores the groups as heartbeat rows.
 */

const NS_PER_MS = 1_000_000n;
/** A point's time may be at most this far ahead of Vigil's clock (as a heartbeat's period end). */
export const MAX_FUTURE_MS = 5 * 60_000;
/** Points older than this are refused: an exporter's buffer never holds data that old. */
export const MAX_AGE_MS = 30 * 86_400_000;
/** A cumulative series seen for the first time counts in full when it started at most this long before its point. */
export const FIRST_POINT_WINDOW_MS = 86_400_000;
/** As a heartbeat's byModel: at most this many models per instance per export interval. */
export const MAX_MODELS_PER_GROUP = 500;
/** As a heartbeat's latencyMs: at most an hour per operation. */
const MAX_LATENCY_S = LIMITS.latencyMs / 1000;

/** What a used point adds to. */
export type Measure = "input" | "output" | "cache_read" | "cache_write" | "duration";

/** What the points of one metric of one resource and scope share. */
export interface MetricOrigin {
  instance: string;
  version: string | null;
  /** Instance, resource, scope and metric of the series (a series key's first part). */
  metricPrefix: string;
  /** The resource's digest and the scope: which instrumentation sent the point. */
  source: string;
  /**
   * From a metric of the newer names (`gen_ai.client.inference.*`): where one instrumentation
   * emits both generations for the same operations, these count and the older ones do not.
   */
  newName: boolean;
  cumulative: boolean;
}

/**
 * One data point Vigil uses, before a cumulative one is turned into an increment. What it shares
 * with other points (its metric's origin, its series' entry in the memo) is referred to, not
 * copied: an export's points live until their increments are taken, and small ones cost the
 * scavenger less.
 */
export class UsagePoint {
  /**
   * What the point adds: a delta point's value and count as they are; a cumulative point's are
   * set when it is taken against its series' state (cumulative.ts), which also says whether it
   * adds anything at all.
   */
  added: number;
  addedCount: number;
  /** Start of the interval the increment covers (ns). */
  fromNs: bigint;

  constructor(
    readonly origin: MetricOrigin,
    readonly series: SeriesEntry,
    /** The point's attributes when they are not the entry's (not flat: never remembered). */
    private readonly own: Attributes | undefined,
    readonly startNs: bigint,
    readonly timeNs: bigint,
    /** Tokens, or for duration seconds. */
    readonly value: number,
    /** Operations the value covers (a histogram's count; 0 for a counter). */
    readonly count: number,
  ) {
    this.added = value;
    this.addedCount = count;
    this.fromNs = origin.cumulative ? 0n : startNs || timeNs;
  }

  get instance(): string {
    return this.origin.instance;
  }
  get version(): string | null {
    return this.origin.version;
  }
  get metricPrefix(): string {
    return this.origin.metricPrefix;
  }
  get source(): string {
    return this.origin.source;
  }
  get newName(): boolean {
    return this.origin.newName;
  }
  get cumulative(): boolean {
    return this.origin.cumulative;
  }
  /** Identity of the series: instance, metric and the point's attributes (a digest when cumulative). */
  get seriesKey(): string {
    return this.series.key;
  }
  /** A cumulative series' key in its stored state (cumulative.ts); the series key when delta. */
  get stateKey(): string {
    return this.series.stateKey;
  }
  /** The point's attributes (for legacySeriesKey): the remembered set when equal. */
  get attributes(): Attributes {
    return this.own ?? (this.series.attributes as Attributes);
  }
  get measure(): Measure {
    return this.series.measure;
  }
  get model(): string {
    return this.series.model;
  }
  get provider(): string | null {
    return this.series.provider;
  }
  /** The operation failed (`error.type` set on a duration point). */
  get failed(): boolean {
    return this.series.failed;
  }
}

/** A point once what it adds is known (`added`, `addedCount`, `fromNs`). */
export type Increment = UsagePoint;

/** What an export request gave: the points used, and what was left out and why. */
export interface MappedMetrics {
  points: UsagePoint[];
  /** Points refused (invalid values or times); each reason is in `problems`. */
  rejected: number;
  problems: string[];
  /** Data points of metrics Vigil does not read, by metric name. */
  ignored: Map<string, number>;
  /** The request carried GenAI token metrics (spans' token attributes then step aside). */
  tokenMetrics: boolean;
}

type MetricRole =
  | { kind: "token-usage" }
  | { kind: "tokens"; measure: Exclude<Measure, "duration"> }
  | { kind: "duration" }
  | { kind: "known" };

/** Metric names Vigil reads, and GenAI ones it knows and deliberately leaves (not "unknown"). */
const METRICS = new Map<string, MetricRole>([
  ["gen_ai.client.token.usage", { kind: "token-usage" }],
  ["gen_ai.client.inference.usage.input_tokens", { kind: "tokens", measure: "input" }],
  ["gen_ai.client.inference.usage.output_tokens", { kind: "tokens", measure: "output" }],
  ["gen_ai.client.inference.usage.cache_read.input_tokens", { kind: "tokens", measure: "cache_read" }],
  ["gen_ai.client.inference.usage.cache_write.input_tokens", { kind: "tokens", measure: "cache_write" }],
  ["gen_ai.client.operation.duration", { kind: "duration" }],
  ["gen_ai.client.inference.duration", { kind: "duration" }],
  // subsets of the counters above, or distributions the conventions say not to sum
  ["gen_ai.client.inference.usage.reasoning.output_tokens", { kind: "known" }],
  ["gen_ai.client.inference.operation.input_tokens", { kind: "known" }],
  ["gen_ai.client.inference.operation.output_tokens", { kind: "known" }],
]);

const TOKEN_TYPES: Record<string, Exclude<Measure, "duration">> = {
  input: "input",
  prompt: "input",
  output: "output",
  completion: "output",
};

const str = (v: AttributeValue | undefined): string | null =>
  typeof v === "string" && v !== "" ? v : typeof v === "number" || typeof v === "bigint" ? String(v) : null;

/** The gateway instance a resource names: `service.instance.id`, else `host.name`, else `service.name`. */
export function instanceOf(resource: Attributes): string {
  return (
    str(resource["service.instance.id"]) ??
    str(resource["host.name"]) ??
    str(resource["service.name"]) ??
    "default"
  ).slice(0, 200);
}

const modelOf = (a: Attributes) =>
  (str(a["gen_ai.response.model"]) ?? str(a["gen_ai.request.model"]) ?? "unknown").slice(0, 200);
const providerOf = (a: Attributes) =>
  (str(a["gen_ai.provider.name"]) ?? str(a["gen_ai.system"]))?.slice(0, 100) ?? null;

/**
 * Attributes as stable text (sorted keys), for a series' identity. The text is part of stored
 * series keys (otlp_series): it must never change for the same attributes.
 */
export function stable(v: AttributeValue): string {
  if (typeof v === "string") return JSON.stringify(v);
  if (typeof v === "bigint") return `${v}n`;
  if (v instanceof Uint8Array) return `b:${Buffer.from(v).toString("base64")}`;
  if (Array.isArray(v)) {
    let out = "[";
    for (let i = 0; i < v.length; i++) out += (i > 0 ? "," : "") + stable(v[i] as AttributeValue);
    return `${out}]`;
  }
  if (v && typeof v === "object") {
    const keys = Object.keys(v).sort();
    let out = "{";
    for (let i = 0; i < keys.length; i++) {
      const k = keys[i] as string;
      out += `${i > 0 ? "," : ""}${JSON.stringify(k)}:${stable(v[k] as AttributeValue)}`;
    }
    return `${out}}`;
  }
  return JSON.stringify(v);
}

export const digest = (text: string) => hash("sha256", text, "base64url").slice(0, 32);

/**
 * A point's attributes as the text of its series' identity: sorted keys, each key and string
 * value length-prefixed (unambiguous without escaping; other values as `stable` writes them).
 * About a third of `stable`'s cost, and a gateway's every point pays it.
 */
export function identityText(a: Attributes): string {
  const keys = Object.keys(a);
  if (keys.length > 1) keys.sort();
  let out = "";
  for (let i = 0; i < keys.length; i++) {
    const k = keys[i] as string;
    const v = a[k];
    out +=
      typeof v === "string"
        ? `${k.length}:${k}${v.length}:${v}`
        : `${k.length}:${k}=${stable(v as AttributeValue)};`;
  }
  return out;
}

/**
 * What a point's attributes give, within one metric: its series key and the fields read from
 * its attributes. The same attributes (and start, for a cumulative point) give the same entry.
 */
interface SeriesEntry {
  /** The flat attribute set it was made from; undefined when not flat (never compared). */
  attributes: Attributes | undefined;
  size: number;
  cumulative: boolean;
  start: bigint;
  key: string;
  /** A cumulative series' key in its stored state (the key's first characters; cumulative.ts). */
  stateKey: string;
  measure: Measure;
  model: string;
  provider: string | null;
  failed: boolean;
}

/**
 * Each metric's entries of its last export, by the points' positions: an exporter sends the same
 * series in the same order every time, and comparing a point's attributes with the ones at its
 * position costs a fraction of building and hashing its identity and reading its fields again.
 * Bounded: emptied when full.
 */
type IdentityMemo = (SeriesEntry | undefined)[];
const memos = new Map<string, IdentityMemo>();
const MEMOS_MAX = 20_000;
/** Points of a metric beyond this many are not remembered (a memo's memory stays bounded). */
const MEMO_POSITIONS = 1_000;
function identityMemo(metricPrefix: string): IdentityMemo {
  let memo = memos.get(metricPrefix);
  if (!memo) {
    if (memos.size >= MEMOS_MAX) memos.clear();
    memo = [];
    memos.set(metricPrefix, memo);
  }
  return memo;
}

/** The number of attributes when every value is a string, number or boolean; else -1. */
function flatSize(a: Attributes): number {
  let n = 0;
  for (const k in a) {
    const v = a[k];
    if (typeof v !== "string" && typeof v !== "number" && typeof v !== "boolean") return -1;
    n++;
  }
  return n;
}

/** Whether two flat attribute sets (flatSize ≥ 0) are equal; `size` is `was`'s. */
function sameFlat(was: Attributes, size: number, now: Attributes): boolean {
  let n = 0;
  for (const k in now) {
    if (was[k] !== now[k]) return false;
    n++;
  }
  return n === size;
}

/** The memo's entry at a point's position, when the point there had the same identity. */
function remembered(
  memo: IdentityMemo,
  i: number,
  attributes: Attributes,
  cumulative: boolean,
  start: bigint,
): SeriesEntry | undefined {
  const e = memo[i];
  if (
    e !== undefined &&
    e.attributes !== undefined &&
    e.cumulative === cumulative &&
    (!cumulative || e.start === start) &&
    sameFlat(e.attributes, e.size, attributes)
  )
    return e;
  return undefined;
}

/** A new entry, remembered at its position (when within the memo's bound). */
function remember(
  memo: IdentityMemo,
  i: number,
  metricPrefix: string,
  attributes: Attributes,
  cumulative: boolean,
  start: bigint,
  fields: { measure: Measure; model: string; provider: string | null; failed: boolean },
): SeriesEntry {
  const series = metricPrefix + identityText(attributes);
  const key = cumulative ? digest(`${series}\n${start}`) : series;
  const size = flatSize(attributes);
  const entry: SeriesEntry = {
    // only flat sets are compared (nested values are rare, and always built)
    attributes: size >= 0 ? attributes : undefined,
    size,
    cumulative,
    start,
    key,
    stateKey: cumulative ? key.slice(0, STATE_KEY_LENGTH) : key,
    ...fields,
  };
  if (i < MEMO_POSITIONS) memo[i] = entry;
  return entry;
}

/**
 * A cumulative series' key in its stored state: its digest's first 12 characters (72 bits; of an
 * instance's at most 5,000 series, two share a key with a chance of about 1 in 4 × 10^14).
 * States stored before 2026-11-29 kept 16: read, they are cut to 12 (cumulative.ts).
 */
export const STATE_KEY_LENGTH = 12;

/**
 * A cumulative point's series key as Vigil wrote it before 2026-11-28 (state format 1, whose
 * identity text was `stable`): for reading the states stored then (cumulative.ts).
 */
export function legacySeriesKey(p: UsagePoint): string {
  return digest(`${p.metricPrefix}${stable(p.attributes)}\n${p.startNs}`);
}

const nsToMs = (ns: bigint) => Number(ns / NS_PER_MS);

/** A NUL or a lone UTF-16 surrogate: text PostgreSQL cannot store. */
// eslint-disable-next-line no-control-regex -- the NUL is what it looks for
const UNSTORABLE = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const unstorable = (...texts: (string | null)[]) => texts.some((t) => t !== null && UNSTORABLE.test(t));
const UNSTORABLE_TEXT =
  "an instance, version, model or provider name holds a NUL character or a lone surrogate";
/** A resource's identity (all its attributes), for the keys of its series. */
const resourceKey = (a: Attributes) => digest(stable(a));

/**
 * A point's time checked against Vigil's clock; null when fine, else what is wrong with it.
 */
function timeProblem(timeNs: bigint, nowMs: number): string | null {
  if (timeNs === 0n) return "time_unix_nano is not set";
  const ms = nsToMs(timeNs);
  if (ms > nowMs + MAX_FUTURE_MS)
    return "time_unix_nano is more than 5 minutes in the future; check the exporter's clock";
  if (ms < nowMs - MAX_AGE_MS) return "time_unix_nano is more than 30 days in the past";
  return null;
}

/** Collects problems as a few distinct messages with counts. */
class Problems {
  readonly counts = new Map<string, number>();
  rejected = 0;
  constructor(private readonly unit: [string, string] = ["point", "points"]) {}
  add(message: string, points = 1) {
    this.rejected += points;
    this.counts.set(message, (this.counts.get(message) ?? 0) + points);
  }
  list(): string[] {
    return [...this.counts].map(([m, n]) => `${n} ${n === 1 ? this.unit[0] : this.unit[1]}: ${m}`);
  }
}

/**
 * The GenAI points of a metrics export request. A point is refused (counted in `rejected`, its
 * reason in `problems`) when its value is missing, not finite, negative or beyond 2^53, its time
 * unset or far off, or its temporality unspecified; a point flagged "no recorded value" is
 * skipped. Points of other metrics are counted in `ignored`.
 */
export function mapMetrics(req: OtlpMetricsRequest, nowMs: number): MappedMetrics {
  const points: UsagePoint[] = [];
  const problems = new Problems();
  const ignored = new Map<string, number>();
  let tokenMetrics = false;
  let lastTime = -1n;
  let lastProblem: string | null = null;
  for (const rm of req.resourceMetrics) {
    const instance = instanceOf(rm.resource.attributes);
    const version = str(rm.resource.attributes["service.version"])?.slice(0, 64) ?? null;
    // a series is its resource (all its attributes: two replicas never share one), its scope, its
    // metric and its point's attributes
    const resource = resourceKey(rm.resource.attributes);
    const resourceUnstorable = unstorable(instance, version);
    for (const sm of rm.scopeMetrics) {
      const scope = `${sm.scope.name}\n${sm.scope.version}`;
      const source = `${resource}\n${scope}`;
      for (const m of sm.metrics) {
        const role = METRICS.get(m.name);
        if (!role || role.kind === "known") {
          if (m.dataPoints.length > 0) ignored.set(m.name, (ignored.get(m.name) ?? 0) + m.dataPoints.length);
          continue;
        }
        if (m.type !== "sum" && m.type !== "histogram") {
          problems.add(
            `${m.name} is a ${m.type}; Vigil reads it as a sum or a histogram`,
            m.dataPoints.length,
          );
          continue;
        }
        if (m.aggregationTemporality === "unspecified") {
          problems.add(`${m.name} has no aggregation temporality (delta or cumulative)`, m.dataPoints.length);
          continue;
        }
        const cumulative = m.aggregationTemporality === "cumulative";
        // a duration in milliseconds (an older instrumentation) is read as seconds
        const scale = role.kind === "duration" && m.unit === "ms" ? 0.001 : 1;
        let metricPrefix: string | undefined;
        let memo: IdentityMemo | undefined;
        let origin: MetricOrigin | undefined;
        let position = -1;
        for (const p of m.dataPoints as (NumberDataPoint | HistogramDataPoint)[]) {
          position++;
          if ((p.flags & 1) === 1) continue; // no recorded value: nothing to add
          let value: number | null;
          let count: number;
          if ("value" in p) {
            value = p.value;
            count = 0;
          } else {
            value = p.sum;
            count = p.count;
          }
          if (p.unsafeInteger) {
            problems.add(`${m.name}: a value beyond 2^53 cannot be counted exactly`);
            continue;
          }
          if (value === null) {
            problems.add(`${m.name}: the point has no value (a histogram needs its sum)`);
            continue;
          }
          if (!Number.isFinite(value) || value < 0) {
            problems.add(`${m.name}: values must be finite and not negative`);
            continue;
          }
          if (role.kind !== "duration" && (value > LIMITS.tokens || count > LIMITS.tokens)) {
            problems.add(`${m.name}: a token count must be at most ${LIMITS.tokens}`);
            continue;
          }
          // the points of an export mostly share their time: judged once per distinct time
          if (p.timeUnixNano !== lastTime) {
            lastTime = p.timeUnixNano;
            lastProblem = timeProblem(p.timeUnixNano, nowMs);
          }
          const when = lastProblem;
          if (when) {
            problems.add(`${m.name}: ${when}`);
            continue;
          }
          if (cumulative && p.startTimeUnixNano === 0n) {
            problems.add(`${m.name}: a cumulative point needs start_time_unix_nano`);
            continue;
          }
          metricPrefix ??= `${instance}\n${resource}\n${scope}\n${m.name}\n`;
          memo ??= identityMemo(metricPrefix);
          let e = remembered(memo, position, p.attributes, cumulative, p.startTimeUnixNano);
          if (!e) {
            let measure: Measure;
            if (role.kind === "token-usage") {
              const type = str(p.attributes["gen_ai.token.type"]);
              const known = type ? TOKEN_TYPES[type] : undefined;
              if (!known) {
                const name = `${m.name} (gen_ai.token.type ${type ?? "unset"})`;
                ignored.set(name, (ignored.get(name) ?? 0) + 1);
                continue;
              }
              measure = known;
            } else measure = role.kind === "tokens" ? role.measure : "duration";
            const model = modelOf(p.attributes);
            const provider = providerOf(p.attributes);
            // a remembered entry's resource (part of the prefix) was storable
            if (resourceUnstorable || unstorable(model, provider)) {
              problems.add(`${m.name}: ${UNSTORABLE_TEXT}`);
              continue;
            }
            const failed = measure === "duration" && str(p.attributes["error.type"]) !== null;
            e = remember(memo, position, metricPrefix, p.attributes, cumulative, p.startTimeUnixNano, {
              measure,
              model,
              provider,
              failed,
            });
          }
          const measure = e.measure;
          if (measure === "duration" && value * scale > MAX_LATENCY_S * Math.max(count, 1)) {
            problems.add(`${m.name}: a duration must be at most ${MAX_LATENCY_S} s per operation`);
            continue;
          }
          if (measure !== "duration") tokenMetrics = true;
          origin ??= {
            instance,
            version,
            metricPrefix,
            source,
            newName: role.kind === "tokens" || m.name === "gen_ai.client.inference.duration",
            cumulative,
          };
          // a cumulative series' key is stored with its state (short), with its start time: each
          // life of a counter (and each of two writers that share every attribute) is its own;
          // a delta point's only names it within this request. The remembered attributes stand
          // for the decoded ones when equal: those are then garbage at once.
          points.push(
            new UsagePoint(
              origin,
              e,
              e.attributes === undefined ? p.attributes : undefined,
              p.startTimeUnixNano,
              p.timeUnixNano,
              value * scale,
              count,
            ),
          );
        }
      }
    }
  }
  return { points, rejected: problems.rejected, problems: problems.list(), ignored, tokenMetrics };
}

/**
 * The last point of a cumulative series, as cumulative.ts keeps it, with the increment it gave
 * (`fromNs` 0 when that is not known: a state stored before 2026-11-29 whose series had one point;
 * a point's time is never 0). Flat: one object per series.
 */
export interface SeriesState {
  startNs: bigint;
  timeNs: bigint;
  value: number;
  count: number;
  /** What the point added, and from when (a baseline: 0 from its own time). */
  fromNs: bigint;
  incValue: number;
  incCount: number;
}

/**
 * What a cumulative point adds, given the series' state before it: null when the point is older
 * than the state's (a resend of an earlier export, or out of order: its interval is counted).
 *
 * - No state: the first point counts in full when its series started within a day of it (an
 *   exporter pointed at Vigil from its start), or when Vigil already follows another series of
 *   the instance with the same start time (`knownStart`: a model first used long after the
 *   exporter started); an older counter is a baseline (0) and counts from its next point on.
 * - The state's own point again (a resend): the increment it gave the first time, as the state
 *   keeps it (so a resend gives the same rows, stored once, however that increment was decided).
 * - Another start time or a smaller value: the counter restarted; the point counts in full.
 * - Otherwise the difference.
 */
export function cumulativeIncrement(
  p: { startNs: bigint; timeNs: bigint; value: number; count: number },
  s: SeriesState | null,
  knownStart = false,
): { value: number; count: number; fromNs: bigint } | null {
  const fresh = () =>
    knownStart || nsToMs(p.timeNs) - nsToMs(p.startNs) <= FIRST_POINT_WINDOW_MS
      ? { value: p.value, count: p.count, fromNs: p.startNs }
      : { value: 0, count: 0, fromNs: p.timeNs };
  if (!s) return fresh();
  if (p.timeNs < s.timeNs) return null;
  if (p.timeNs === s.timeNs) {
    if (p.startNs !== s.startNs) return null; // a point of an earlier life of the series: already counted
    // a state stored before its increment was kept (format 2, a series of one point): as then
    if (s.fromNs === 0n) return fresh();
    return { value: s.incValue, count: s.incCount, fromNs: s.fromNs };
  }
  if (p.startNs !== s.startNs || p.value < s.value || p.count < s.count)
    return { value: p.value, count: p.count, fromNs: p.startNs };
  return { value: p.value - s.value, count: p.count - s.count, fromNs: s.timeNs };
}

/** One model's share of a group. */
export interface ModelUsage {
  model: string;
  input: number;
  output: number;
  cacheRead: number;
  cacheWrite: number;
  /** Its providers (distinct; mostly one). */
  providers: string[];
}

/**
 * One gateway instance's usage over one export interval (points of the same time), or its spans
 * ending in one 10-second window: stored as one heartbeat row with a model row per model.
 */
export interface UsageGroup {
  signal: "metrics" | "traces";
  instance: string;
  version: string | null;
  /** The row's time: the points' time, or the latest span end (ms). */
  timeMs: number;
  fromMs: number;
  /** What the group is made of, for its id: series keys and times, or span ids. */
  parts: string[];
  models: Map<string, ModelUsage>;
  input: number;
  output: number;
  cacheRead: number;
  cacheWrite: number;
  /** Operations: a duration's count, else the input token histogram's count, or the spans. */
  requests: number;
  tokenRequests: number;
  errors: number;
  durationSeconds: number;
  durationCount: number;
}

function newGroup(
  signal: UsageGroup["signal"],
  instance: string,
  version: string | null,
  timeMs: number,
): UsageGroup {
  return {
    signal,
    instance,
    version,
    timeMs,
    fromMs: timeMs,
    parts: [],
    models: new Map(),
    input: 0,
    output: 0,
    cacheRead: 0,
    cacheWrite: 0,
    requests: 0,
    tokenRequests: 0,
    errors: 0,
    durationSeconds: 0,
    durationCount: 0,
  };
}

function modelIn(g: UsageGroup, model: string): ModelUsage {
  let m = g.models.get(model);
  if (!m) {
    m = { model, input: 0, output: 0, cacheRead: 0, cacheWrite: 0, providers: [] };
    g.models.set(model, m);
  }
  return m;
}

/** Token counts are whole numbers; a histogram's sum of them is too, up to float noise. */
const whole = (n: number) => Math.round(n);

/**
 * Increments grouped per instance and point time. The requests of a group are its duration
 * points' count (every operation, failed ones too), else its input-token histogram's count.
 */
export function groupIncrements(increments: readonly Increment[]): UsageGroup[] {
  const groups = new Map<string, UsageGroup>();
  // the same point twice in one request (a Collector merging a retry with the original): once.
  // By series key (mostly the memo's strings, whose hashes V8 keeps), then start and time.
  const seen = new Map<string, UsagePoint | UsagePoint[]>();
  const firstTime = (p: UsagePoint) => {
    const was = seen.get(p.seriesKey);
    if (was === undefined) {
      seen.set(p.seriesKey, p);
      return true;
    }
    const list = Array.isArray(was) ? was : [was];
    if (list.some((q) => q.startNs === p.startNs && q.timeNs === p.timeNs)) return false;
    list.push(p);
    if (!Array.isArray(was)) seen.set(p.seriesKey, list);
    return true;
  };
  // an instrumentation migrating between the conventions' generations may emit both (dual
  // emission): the same tokens and operations twice, from the same resource and scope. A
  // newer-name point makes the older-name ones of the same usage (instance, resource, scope,
  // time, model, provider, measure and failure) not count; another instrumentation's stay.
  const dualKey = (p: UsagePoint) =>
    `${p.instance}\n${p.source}\n${p.timeNs}\n${p.model}\n${p.provider}\n${p.measure}\n${p.failed}`;
  let newer: Set<string> | null = null;
  for (const p of increments) if (p.newName) (newer ??= new Set()).add(dualKey(p));
  // the points of a request mostly share their start and time: each turned into text once
  const text = new Map<bigint, string>();
  let lastNs = -1n;
  let lastText = "";
  const textOf = (ns: bigint) => {
    if (ns === lastNs) return lastText;
    let t = text.get(ns);
    if (t === undefined) text.set(ns, (t = String(ns)));
    lastNs = ns;
    lastText = t;
    return t;
  };
  let g: UsageGroup | undefined;
  let groupTimeNs = -1n;
  let lastFromNs = -1n;
  let lastFromMs = 0;
  for (const p of increments) {
    if (!firstTime(p)) continue;
    const doubled = newer !== null && !p.newName && newer.has(dualKey(p));
    // the group's id is made of these (ingest.ts): one per point, in the same form as ever
    const part = `${p.seriesKey}:${textOf(p.startNs)}:${textOf(p.timeNs)}`;
    if (g === undefined || g.instance !== p.instance || groupTimeNs !== p.timeNs) {
      const timeMs = nsToMs(p.timeNs);
      const key = `${p.instance}\n${timeMs}`;
      g = groups.get(key);
      if (!g) {
        g = newGroup("metrics", p.instance, p.version, timeMs);
        groups.set(key, g);
      }
      groupTimeNs = p.timeNs;
    }
    g.parts.push(part);
    if (p.fromNs !== lastFromNs) {
      lastFromNs = p.fromNs;
      lastFromMs = nsToMs(p.fromNs);
    }
    const fromMs = lastFromMs;
    if (fromMs < g.fromMs) g.fromMs = fromMs;
    if (doubled) {
      // its usage is the newer names'; the older token histogram's count still says how many
      // operations there were (the newer counters do not)
      if (p.measure === "input") g.tokenRequests += p.addedCount;
      continue;
    }
    const m = modelIn(g, p.model);
    if (p.provider && !m.providers.includes(p.provider)) m.providers.push(p.provider);
    switch (p.measure) {
      case "input":
        m.input += whole(p.added);
        g.input += whole(p.added);
        g.tokenRequests += p.addedCount;
        break;
      case "output":
        m.output += whole(p.added);
        g.output += whole(p.added);
        break;
      case "cache_read":
        m.cacheRead += whole(p.added);
        g.cacheRead += whole(p.added);
        break;
      case "cache_write":
        m.cacheWrite += whole(p.added);
        g.cacheWrite += whole(p.added);
        break;
      case "duration":
        g.durationSeconds += p.added;
        g.durationCount += p.addedCount;
        if (p.failed) g.errors += p.addedCount;
        break;
    }
  }
  for (const g of groups.values()) {
    g.requests = g.durationCount > 0 ? g.durationCount : g.tokenRequests;
    // a model only timed, with no tokens, is not a usage row
    for (const [name, m] of g.models)
      if (m.input + m.output + m.cacheRead + m.cacheWrite === 0 && g.models.size > 1) g.models.delete(name);
  }
  return [...groups.values()];
}

const SPAN_WINDOW_MS = 10_000;

const TOKEN_ATTRIBUTES: [Exclude<Measure, "duration">, string[]][] = [
  ["input", ["gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens"]],
  ["output", ["gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens"]],
  ["cache_read", ["gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.cache_read_input_tokens"]],
  ["cache_write", ["gen_ai.usage.cache_creation.input_tokens", "gen_ai.usage.cache_creation_input_tokens"]],
];

const GENAI_MARKERS = [
  "gen_ai.operation.name",
  "gen_ai.request.model",
  "gen_ai.response.model",
  "gen_ai.provider.name",
  "gen_ai.system",
];

export interface MappedSpans {
  groups: UsageGroup[];
  /** GenAI spans used. */
  used: number;
  rejected: number;
  problems: string[];
  /** Spans that are not GenAI operations. */
  ignored: number;
}

/**
 * The GenAI spans of a traces export request (a span with a `gen_ai.*` operation, model or
 * provider attribute), grouped per instance and 10-second window of their end times. Each span is
 * one request: its tokens from the `gen_ai.usage.*` attributes, its latency its duration, an
 * error when its status is ERROR or it has `error.type`.
 */
export function mapSpans(req: OtlpTracesRequest, nowMs: number): MappedSpans {
  const groups = new Map<string, UsageGroup>();
  const problems = new Problems(["span", "spans"]);
  const seen = new Set<string>();
  let used = 0;
  let ignored = 0;
  for (const rs of req.resourceSpans) {
    const instance = instanceOf(rs.resource.attributes);
    const version = str(rs.resource.attributes["service.version"])?.slice(0, 64) ?? null;
    for (const ss of rs.scopeSpans) {
      for (const span of ss.spans) {
        const a = span.attributes;
        if (
          !GENAI_MARKERS.some((k) => a[k] !== undefined) &&
          !TOKEN_ATTRIBUTES.some(([, ks]) => ks.some((k) => a[k] !== undefined))
        ) {
          ignored++;
          continue;
        }
        const when = timeProblem(span.endTimeUnixNano, nowMs);
        if (when) {
          problems.add(when.replace("time_unix_nano", "end_time_unix_nano"));
          continue;
        }
        if (span.startTimeUnixNano === 0n || span.startTimeUnixNano > span.endTimeUnixNano) {
          problems.add("start_time_unix_nano is unset or after end_time_unix_nano");
          continue;
        }
        if (unstorable(instance, version, modelOf(a), providerOf(a))) {
          problems.add(UNSTORABLE_TEXT);
          continue;
        }
        if (span.endTimeUnixNano - span.startTimeUnixNano > BigInt(LIMITS.latencyMs) * NS_PER_MS) {
          problems.add(`a span must last at most ${MAX_LATENCY_S} s`);
          continue;
        }
        const tokens: Partial<Record<Exclude<Measure, "duration">, number>> = {};
        let bad: string | null = null;
        for (const [measure, keys] of TOKEN_ATTRIBUTES) {
          const key = keys.find((k) => a[k] !== undefined);
          if (!key) continue;
          const v = a[key];
          const n = typeof v === "string" && /^\d+$/.test(v) ? Number(v) : v;
          if (typeof n !== "number" || !Number.isSafeInteger(n) || n < 0 || n > LIMITS.tokens) {
            bad = `${key} must be a whole number of tokens, from 0 to ${LIMITS.tokens}`;
            break;
          }
          tokens[measure] = n;
        }
        if (bad) {
          problems.add(bad);
          continue;
        }
        // the same span twice in one request: once
        // (a span without ids, which OTLP does not allow, is never taken for another)
        const part = `${span.traceId}:${span.spanId}`;
        if (span.spanId !== "") {
          if (seen.has(part)) continue;
          seen.add(part);
        }
        used++;
        const endMs = nsToMs(span.endTimeUnixNano);
        const window = Math.floor(endMs / SPAN_WINDOW_MS);
        const key = `${instance}\n${window}`;
        let g = groups.get(key);
        if (!g) {
          g = newGroup("traces", instance, version, endMs);
          groups.set(key, g);
        }
        g.timeMs = Math.max(g.timeMs, endMs);
        g.fromMs = Math.min(g.fromMs, nsToMs(span.startTimeUnixNano));
        g.parts.push(part);
        const m = modelIn(g, modelOf(a));
        const provider = providerOf(a);
        if (provider && !m.providers.includes(provider)) m.providers.push(provider);
        m.input += tokens.input ?? 0;
        m.output += tokens.output ?? 0;
        m.cacheRead += tokens.cache_read ?? 0;
        m.cacheWrite += tokens.cache_write ?? 0;
        g.input += tokens.input ?? 0;
        g.output += tokens.output ?? 0;
        g.cacheRead += tokens.cache_read ?? 0;
        g.cacheWrite += tokens.cache_write ?? 0;
        g.requests++;
        g.durationCount++;
        g.durationSeconds += Number(span.endTimeUnixNano - span.startTimeUnixNano) / 1e9;
        if (span.status.code === "error" || str(a["error.type"]) !== null) g.errors++;
      }
    }
  }
  return {
    groups: [...groups.values()],
    used,
    rejected: problems.rejected,
    problems: problems.list(),
    ignored,
  };
}
