import type { AppContext } from "../core/context.js";
import { perApp } from "../core/context.js";
import { ServiceError } from "../core/errors.js";
import {
  cumulativeIncrement,
  type Increment,
  legacySeriesKey,
  MAX_AGE_MS,
  type SeriesState,
  STATE_KEY_LENGTH,
  type UsagePoint,
} from "./map.js";
import { selectInstanceState, type StateSwap, swapInstanceStates } from "./repository.js";

/**
 * The state of cumulative series: per gateway instance, each series' last point taken, so the
 * next point becomes an increment. PostgreSQL (otlp_series) holds it for every process; each
 * process keeps the instances it served in memory with the version it read, and writes a changed
 * state back only if the stored version is still that one (compare and set). An export therefore
 * costs one statement; a process whose copy is stale (another worker or node took the instance's
 * last export) finds out from the swap, reads the state again and recomputes, so no interval is
 * ever counted twice, whichever process takes which export.
 *
 * Within a process, an instance's exports are taken one at a time, each until its rows are stored
 * or not (a lock per instance), so two concurrent exports of one instance never race for its state,
 * and a failed one's state is put back before the next is taken.
 */

/**
 * A series' state with the text of its value and count, and of its increment, as the stored form
 * writes them: each export formats its new values once.
 */
interface StoredSeries extends SeriesState {
  text: string;
  incText: string;
}
type Series = Map<string, StoredSeries>;
interface Entry {
  version: number | null;
  series: Series;
  usedAt: number;
}

/**
 * The most series Vigil follows per gateway instance (each export rewrites the instance's whole
 * state: about 45 bytes a series). 500 models with every token type and a duration are 3,000;
 * a restart doubles them until the earlier life's leave. At the cap, series not moved for a day
 * make room; when none is that old, points of further new series are refused.
 */
export const MAX_SERIES_PER_INSTANCE = 5_000;
/**
 * At the cap, series not moved for this long leave to make room. One that comes back later is
 * new again: its next point counts in full when its start is known (cumulativeIncrement).
 */
const STALE_AT_CAP_MS = 86_400_000;

/** An instance not exported for this long leaves memory (its state stays in PostgreSQL). */
const IDLE_MS = 60 * 60_000;
/** Attempts at the swap before the export is answered 503 (retried by the exporter). */
const ATTEMPTS = 4;

/** What the first format stored per series (JSON, migration 030); still read. */
type StoredV1 = [string, string, number, number, string | null, string | null, number | null, number | null];

/**
 * The stored form of an instance's series (otlp_series.state). Format 3, written since
 * 2026-11-29, is text without quotes or "|" (several are sent joined by "|" in one text:
 * repository.ts), small enough that most instances' rows stay within half of PostgreSQL's page
 * (migrations 031 and 032):
 *
 *     v3
 *     <time ns>,<time ns>,…                    distinct starts and times, referred to by index
 *     <key> <start> <time> <value> <count> <from> <added value> <added count>
 *     …
 *
 * A key is the series digest's first STATE_KEY_LENGTH characters; `from` and the added value
 * and count are the increment the point gave (what a resend of it gives again).
 *
 * Still read: format 2 (2026-11-28; 16-character keys, cut to 12, and the point before instead of
 * the increment: its increment is worked out from it as it was then) and format 1 (a JSON object
 * of key -> [start, time, value, count, prev…]). Format 1's keys were digests of another identity
 * text (map.ts, legacySeriesKey): they are kept marked with `~` and taken over by a series the
 * first time its point misses under its own key, so a series an exporter sends only now and then
 * is never taken for a new one after an upgrade.
 */
const LEGACY = "~";
/** A series' key in the state: its digest's first characters (mapMetrics gives it as `stateKey`). */
const stateKey = (seriesKey: string) => seriesKey.slice(0, STATE_KEY_LENGTH);

/** A series of formats 1 and 2: its increment from the point before, as those formats worked it out. */
function fromPrevious(
  startNs: bigint,
  timeNs: bigint,
  value: number,
  count: number,
  prev: { startNs: bigint; timeNs: bigint; value: number; count: number } | null,
): StoredSeries {
  const s = { startNs, timeNs, value, count, text: `${value} ${count}` };
  // no point before: the increment was decided from the series' start (cumulativeIncrement, fresh)
  if (prev === null) return { ...s, fromNs: 0n, incValue: 0, incCount: 0, incText: "" };
  const reset = prev.startNs !== startNs || value < prev.value || count < prev.count;
  const inc = reset
    ? { fromNs: startNs, incValue: value, incCount: count }
    : { fromNs: prev.timeNs, incValue: value - prev.value, incCount: count - prev.count };
  return { ...s, ...inc, incText: `${inc.incValue} ${inc.incCount}` };
}

function parse(text: string): Series {
  const out: Series = new Map();
  if (text.startsWith("{")) {
    const raw = JSON.parse(text) as Record<string, StoredV1>;
    for (const [k, v] of Object.entries(raw)) {
      const [start, time, value, count, ps, pt, pv, pc] = v;
      const startNs = BigInt(start);
      const prev =
        ps === null || pt === null
          ? null
          : { startNs: BigInt(ps), timeNs: BigInt(pt), value: pv ?? 0, count: pc ?? 0 };
      out.set(LEGACY + stateKey(k), fromPrevious(startNs, BigInt(time), value, count, prev));
    }
    return out;
  }
  const lines = text.split("\n");
  const format = lines[0];
  if (format !== "v3" && format !== "v2")
    throw new Error(`otlp_series.state: unknown format ${JSON.stringify(format)}`);
  const times = (lines[1] ?? "").split(",").map((t) => BigInt(t || "0"));
  const time = (i: string | undefined) => {
    const t = times[Number(i)];
    if (t === undefined) throw new Error("otlp_series.state: a time index out of range");
    return t;
  };
  for (let i = 2; i < lines.length; i++) {
    const f = (lines[i] as string).split(" ");
    if (f.length < 5) continue;
    const stored = f[0] as string;
    // format 2's keys (of 16 characters) are cut; a key marked `~` keeps its mark
    const key =
      format === "v3"
        ? stored
        : stored.startsWith(LEGACY)
          ? LEGACY + stateKey(stored.slice(1))
          : stateKey(stored);
    const value = Number(f[3]);
    const count = Number(f[4]);
    if (format === "v2") {
      const prev =
        f.length >= 9
          ? { startNs: time(f[5]), timeNs: time(f[6]), value: Number(f[7]), count: Number(f[8]) }
          : null;
      out.set(key, fromPrevious(time(f[1]), time(f[2]), value, count, prev));
      continue;
    }
    const known = f.length >= 8;
    const incValue = known ? Number(f[6]) : 0;
    const incCount = known ? Number(f[7]) : 0;
    out.set(key, {
      startNs: time(f[1]),
      timeNs: time(f[2]),
      value,
      count,
      text: `${value} ${count}`,
      fromNs: known ? time(f[5]) : 0n,
      incValue,
      incCount,
      incText: known ? `${incValue} ${incCount}` : "",
    });
  }
  return out;
}

function serialize(series: Series): string {
  const index = new Map<bigint, number>();
  const times: bigint[] = [];
  const add = (t: bigint) => {
    let i = index.get(t);
    if (i === undefined) {
      i = times.length;
      index.set(t, i);
      times.push(t);
    }
    return i;
  };
  // the series of an instance mostly share their starts and times: each column keeps its last
  let start = -1n;
  let startAt = -1;
  let time = -1n;
  let timeAt = -1;
  let from = -1n;
  let fromAt = -1;
  let body = "";
  for (const [k, s] of series) {
    if (s.startNs !== start) startAt = add((start = s.startNs));
    if (s.timeNs !== time) timeAt = add((time = s.timeNs));
    body += `\n${k} ${startAt} ${timeAt} ${s.text}`;
    if (s.fromNs !== 0n) {
      if (s.fromNs !== from) fromAt = add((from = s.fromNs));
      body += ` ${fromAt} ${s.incText}`;
    }
  }
  return `v3\n${times.join(",")}${body}`;
}

/**
 * What `step` changed in a state, to put it back: keys and the states they held before
 * (undefined: the key was new), in the order of the changes.
 */
type ChangeLog = (string | StoredSeries | undefined)[];

/** Sets (or with undefined deletes) a series' state, logging what it held. */
function change(series: Series, log: ChangeLog, key: string, state: StoredSeries | undefined) {
  log.push(key, series.get(key));
  if (state === undefined) series.delete(key);
  else series.set(key, state);
}

/** Puts back what `log` changed in `series`, latest change first. */
function revert(series: Series, log: ChangeLog) {
  for (let i = log.length - 2; i >= 0; i -= 2) {
    const key = log[i] as string;
    const was = log[i + 1] as StoredSeries | undefined;
    if (was === undefined) series.delete(key);
    else series.set(key, was);
  }
  log.length = 0;
}

/**
 * The increments of one instance's cumulative points (in time order) against `series`, which
 * takes the points in place (no copy of the state per export). `log` holds what changed (empty:
 * nothing did, a resend or only older points), for `revert`.
 */
function step(
  points: readonly UsagePoint[],
  series: Series,
  nowMs: number,
): { incs: Increment[]; log: ChangeLog; refused: number } {
  const incs: Increment[] = [];
  const log: ChangeLog = [];
  let refused = 0;
  let starts: Set<bigint> | null = null;
  let legacy: boolean | null = null;
  for (const p of points) {
    const key = p.stateKey;
    let s = series.get(key) ?? null;
    if (!s) {
      // a state stored before 2026-11-28 names this series by its former key: it takes it over
      legacy ??= [...series.keys()].some((k) => k.startsWith(LEGACY));
      const old = legacy ? LEGACY + stateKey(legacySeriesKey(p)) : null;
      s = old === null ? null : (series.get(old) ?? null);
      if (s && old !== null) {
        change(series, log, old, undefined);
        change(series, log, key, s);
      }
    }
    if (!s && series.size >= MAX_SERIES_PER_INSTANCE) {
      // full: series not moved for a day make room (a counter's earlier life, before its
      // process restarted, never moves again; nor does a model no longer used)
      const stale = BigInt(nowMs - STALE_AT_CAP_MS) * 1_000_000n;
      const gone = [...series].filter(([, e]) => e.timeNs < stale).map(([k]) => k);
      for (const k of gone) change(series, log, k, undefined);
      if (series.size >= MAX_SERIES_PER_INSTANCE) {
        refused++;
        continue;
      }
    }
    if (!s && !starts) {
      // the starts of the series as the state was before this export
      starts = new Set();
      const before = new Map<string, SeriesState | undefined>();
      for (let i = 0; i < log.length; i += 2)
        if (!before.has(log[i] as string))
          before.set(log[i] as string, log[i + 1] as SeriesState | undefined);
      for (const [k, e] of series) if (!before.has(k)) starts.add(e.startNs);
      for (const e of before.values()) if (e) starts.add(e.startNs);
    }
    const inc = cumulativeIncrement(p, s, !s && (starts?.has(p.startNs) ?? false));
    if (!inc) continue;
    p.added = inc.value;
    p.addedCount = inc.count;
    p.fromNs = inc.fromNs;
    incs.push(p);
    if (s && p.timeNs === s.timeNs) continue; // a resend of the latest point: the state stays
    // as change() does, with the state the key holds already at hand (s, or none)
    log.push(key, s ?? undefined);
    series.set(key, {
      startNs: p.startNs,
      timeNs: p.timeNs,
      value: p.value,
      count: p.count,
      text: `${p.value} ${p.count}`,
      fromNs: inc.fromNs,
      incValue: inc.value,
      incCount: inc.count,
      incText: `${inc.value} ${inc.count}`,
    });
  }
  if (log.length > 0) {
    // series an instance stopped exporting leave its state once their points would be refused
    const oldest = BigInt(nowMs - MAX_AGE_MS) * 1_000_000n;
    for (const [k, e] of series) if (e.timeNs < oldest) change(series, log, k, undefined);
  }
  return { incs, log, refused };
}

/** An instance whose state an export changed: its entry, what changed, and the version written. */
interface Taken {
  connectionId: string;
  instance: string;
  entry: Entry;
  log: ChangeLog;
  version: number;
}

const compareSwaps = (a: StateSwap, b: StateSwap) =>
  a.connectionId < b.connectionId
    ? -1
    : a.connectionId > b.connectionId
      ? 1
      : a.instance < b.instance
        ? -1
        : a.instance > b.instance
          ? 1
          : 0;

/** PostgreSQL's code of an error, when it is one. */
const sqlState = (err: unknown) => (err as { code?: unknown }).code;
/** A deadlock or serialization failure: another process's statement won. */
const isConflict = (err: unknown) => sqlState(err) === "40P01" || sqlState(err) === "40001";
/** The statement was refused for what it carried (not the store being down). */
const isStatementError = (err: unknown) => {
  const code = sqlState(err);
  return typeof code === "string" && /^(22|23|40)/.test(code);
};

/** What `increments` answers: see there. */
export interface TakenIncrements {
  incs: Increment[];
  undo: () => Promise<void>;
  release: () => void;
  /** Points of new series refused per instance (MAX_SERIES_PER_INSTANCE reached). */
  refused: Map<string, number>;
}

class CumulativeState {
  private readonly entries = new Map<string, Entry>();
  private readonly chains = new Map<string, Promise<unknown>>();
  private readonly queue: {
    swap: StateSwap;
    resolve: (version: number | null) => void;
    reject: (err: unknown) => void;
  }[] = [];
  private flushing: Promise<void> | null = null;
  /** Swaps still to send one by one after a shared statement failed. */
  private single = 0;
  private sweptAt = 0;

  constructor(private readonly ctx: AppContext) {}

  /**
   * The increments of a connection's cumulative points (any instances, any order). Each instance
   * stays locked in this process until `release` (after its rows were stored, or not): the next
   * export of an instance is taken only once this one's outcome is known. `undo` puts back each
   * instance's state as it was before (if no other process changed it since): for when the rows
   * could not be stored, so the exporter's retry, or its next export, counts the interval again
   * instead of it being lost. Call `undo` (if at all) before `release`.
   */
  async increments(connectionId: string, points: readonly UsagePoint[]): Promise<TakenIncrements> {
    const byInstance = new Map<string, UsagePoint[]>();
    for (const p of points) {
      const list = byInstance.get(p.instance);
      if (list) list.push(p);
      else byInstance.set(p.instance, [p]);
    }
    const out: Increment[] = [];
    const refused = new Map<string, number>();
    const taken: Taken[] = [];
    const releases: (() => void)[] = [];
    const release = () => {
      for (const r of releases.splice(0)) r();
    };
    // locked in name order: two requests sharing instances never wait on each other in a circle
    const instances = [...byInstance.keys()].sort();
    for (const instance of instances) releases.push(await this.lock(`${connectionId}\n${instance}`));
    // then every instance at once: their swaps go out in one statement, not one after another
    const results = await Promise.allSettled(
      instances.map((instance) => {
        const list = byInstance.get(instance) as UsagePoint[];
        // a request may carry several points of one series (a Collector batching intervals): in time order
        list.sort((a, b) => (a.timeNs < b.timeNs ? -1 : a.timeNs > b.timeNs ? 1 : 0));
        return this.take(connectionId, instance, list);
      }),
    );
    let failure: { reason: unknown } | null = null;
    results.forEach((r, i) => {
      const instance = instances[i] as string;
      if (r.status === "rejected") {
        failure ??= { reason: r.reason };
        return;
      }
      const t = r.value;
      for (const inc of t.incs) out.push(inc);
      if (t.refused > 0) refused.set(instance, t.refused);
      if (t.log) taken.push({ connectionId, instance, entry: t.entry, log: t.log, version: t.version });
    });
    if (failure) {
      await this.undo(taken);
      release();
      throw (failure as { reason: unknown }).reason;
    }
    this.sweep();
    return { incs: out, undo: () => this.undo(taken), release, refused };
  }

  /** Waits until no other export of this process holds `key`; resolves with its release. */
  private async lock(key: string): Promise<() => void> {
    const before = this.chains.get(key);
    let release = () => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    const tail = (before ?? Promise.resolve()).then(() => held);
    this.chains.set(key, tail);
    void tail.then(() => {
      if (this.chains.get(key) === tail) this.chains.delete(key);
    });
    if (before) await before;
    return release;
  }

  private async take(
    connectionId: string,
    instance: string,
    points: UsagePoint[],
  ): Promise<{ incs: Increment[]; entry: Entry; log: ChangeLog | null; version: number; refused: number }> {
    const key = `${connectionId}\n${instance}`;
    const now = this.ctx.now();
    let entry = this.entries.get(key) ?? (await this.load(connectionId, instance));
    for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
      const { incs, log, refused } = step(points, entry.series, now.getTime());
      entry.usedAt = now.getTime();
      if (log.length === 0) {
        this.entries.set(key, entry);
        return { incs, entry, log: null, version: entry.version ?? 0, refused };
      }
      let version: number | null;
      try {
        version = await this.swap({
          connectionId,
          instance,
          version: entry.version,
          state: serialize(entry.series),
        });
      } catch (err) {
        // not stored: the state stays as it was
        revert(entry.series, log);
        throw err;
      }
      if (version !== null) {
        entry.version = version;
        this.entries.set(key, entry);
        return { incs, entry, log, version, refused };
      }
      // another process took this instance's export since: its state, then again
      this.entries.delete(key);
      entry = await this.load(connectionId, instance);
    }
    this.entries.delete(key);
    throw new ServiceError(
      "unavailable",
      "The gateway instance's exports are being taken by several Vigil processes at once; nothing was stored. Retry shortly.",
      { retryAfter: 1 },
    );
  }

  /**
   * Puts back the states `taken` changed, each only if it is still the one written then (the
   * caller still holds their locks, so only another process can have changed one).
   */
  private async undo(taken: readonly Taken[]): Promise<void> {
    await Promise.all(taken.map((t) => this.undoOne(t)));
  }

  private async undoOne(t: Taken): Promise<void> {
    const key = `${t.connectionId}\n${t.instance}`;
    revert(t.entry.series, t.log);
    let back: number | null = null;
    try {
      back = await this.swap({
        connectionId: t.connectionId,
        instance: t.instance,
        version: t.version,
        state: serialize(t.entry.series),
      });
    } catch {
      // the relational store is down too: a retry of the latest point still gives its increment again
    }
    if (back !== null) {
      t.entry.version = back;
      t.entry.usedAt = Date.now();
      this.entries.set(key, t.entry);
    } else this.entries.delete(key);
  }

  /**
   * Swaps in one state, in the next shared statement: while one is out, the swaps of other
   * exports queue and go out together (one commit for many exports, as the series store's group
   * commit). Resolves with the version written, or null when it was not (changed meanwhile).
   */
  private swap(s: StateSwap): Promise<number | null> {
    return new Promise<number | null>((resolve, reject) => {
      this.queue.push({ swap: s, resolve, reject });
      if (!this.flushing) this.flushing = this.flushLoop();
    });
  }

  private async flushLoop(): Promise<void> {
    while (this.queue.length > 0) {
      // in key order: two processes' statements lock the rows they share in the same order
      const size = this.single > 0 ? 1 : 500;
      if (this.single > 0) this.single--;
      const batch = this.queue.splice(0, size).sort((a, b) => compareSwaps(a.swap, b.swap));
      try {
        const written = await swapInstanceStates(
          this.ctx.stores.db,
          batch.map((b) => b.swap),
          this.ctx.now(),
        );
        for (const b of batch) b.resolve(written.get(`${b.swap.connectionId}\n${b.swap.instance}`) ?? null);
      } catch (err) {
        if (batch.length === 1 || !isStatementError(err)) {
          // a conflict with another process is a swap that did not happen: read again, recompute
          for (const b of batch) {
            if (isConflict(err)) b.resolve(null);
            // the key's connection was deleted a moment ago (its key still cached): not a 500
            else if (sqlState(err) === "23503")
              b.reject(new ServiceError("unauthenticated", "The key's gateway connection no longer exists."));
            else b.reject(err);
          }
          continue;
        }
        // one swap the store refused fails the shared statement: each alone, so only it fails
        for (const b of batch) this.queue.unshift(b);
        this.single = batch.length;
      }
    }
    this.flushing = null;
  }

  private async load(connectionId: string, instance: string): Promise<Entry> {
    const stored = await selectInstanceState(this.ctx.stores.db, connectionId, instance);
    return stored
      ? { version: stored.version, series: parse(stored.state), usedAt: 0 }
      : { version: null, series: new Map(), usedAt: 0 };
  }

  private sweep() {
    const now = Date.now();
    if (now - this.sweptAt < IDLE_MS / 4) return;
    this.sweptAt = now;
    const idle = this.ctx.now().getTime() - IDLE_MS;
    for (const [k, e] of this.entries) if (e.usedAt < idle) this.entries.delete(k);
  }
}

/** This app's cumulative series state. */
export const cumulativeState = perApp((ctx) => new CumulativeState(ctx));
