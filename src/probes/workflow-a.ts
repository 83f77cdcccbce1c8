import type { Agent } from "undici";
import { DEFAULT_MAX_BYTES, type HttpOutcome, probeHttp } from "./http.js";
import {
  asId,
  type CheckResult,
  field,
  isRecord,
  type PlatformRun,
  plausibleStart,
  type SyncBudget,
  type SyncOutcome,
  type SyncState,
  text,
  type TickLimits,
  type TrackedRun,
} from "./platform.js";

/**
 * `workflow_a`: a self-hosted n8n instance through its public API (`/api/v1`, header
 * `X-N8N-API-KEY`). What this adapter relies on was observed on a real n8n 1.123 (docs/operations.md:
 * "Platforms as they really behave"):
 *
 * - `GET /api/v1/executions` lists runs newest id first, `limit` at most 250, keyset pages through
 *   `nextCursor`. Runs its process still holds are left out: running ones appear only with
 *   `status=running`, waiting ones not at all. Ids are increasing integers (as strings).
 * - A waiting run that resumes gets a new `startedAt`; its id stays. A queued run (`new`) has
 *   `startedAt: null`; only the by-id answer has its `createdAt`.
 * - `GET /api/v1/executions/{id}` answers any run the key may see, finished or not; 404 once it is
 *   deleted or pruned. `includeData=true` adds the run data, where a failure's message, failing
 *   node and last node are (`data.resultData.error`, `.lastNodeExecuted`).
 * - `/api/v1/workflows` returns whole workflow bodies (megabytes are possible), so the check
 *   never reads it; names come one workflow at a time, bounded per tick.
 * - Right after a start `/healthz` answers before the API is mounted; `/healthz/readiness` says
 *   when it is (older versions lack it: 404 there falls back to `/healthz`).
 */

/** n8n's execution statuses (its `ExecutionStatus` type) on the spec's five, plus what stays open. */
export const WORKFLOW_A_STATUSES: Record<string, { status: string; open: boolean; note: string }> = {
  new: { status: "running", open: true, note: "queued, not started yet" },
  running: { status: "running", open: true, note: "" },
  waiting: { status: "waiting", open: true, note: "paused at a Wait node until a time or a call" },
  success: { status: "success", open: false, note: "" },
  error: { status: "error", open: false, note: "" },
  crashed: { status: "error", open: false, note: "the n8n process died during the run" },
  canceled: { status: "cancelled", open: false, note: "stopped by a person or a timeout" },
  unknown: { status: "unknown", open: false, note: "n8n itself could not tell; stored as such" },
};

/** A status n8n may add later is stored as sent (bounded), never taken for running. */
export function mapWorkflowAStatus(raw: unknown): { status: string; open: boolean } {
  const s = typeof raw === "string" ? raw.trim().toLowerCase() : "";
  // Own keys only: "constructor" or "toString" are statuses Vigil does not know, not Object's.
  const known = Object.hasOwn(WORKFLOW_A_STATUSES, s) ? WORKFLOW_A_STATUSES[s] : undefined;
  if (known) return { status: known.status, open: known.open };
  return { status: s ? s.replace(/[^a-z0-9_-]/g, "").slice(0, 32) || "unknown" : "unknown", open: false };
}

const MAX_PAGE = 250;
/** A health answer is a few bytes (`{"status":"ok"}`); a 2xx past this is a failed check, not read on. */
const HEALTH_MAX_BYTES = 64 * 1024;
/** The answer of the authenticated check request is small by construction; more is not n8n. */
const CHECK_MAX_BYTES = 256 * 1024;
/**
 * A failed run's data (every node's output) can be large; past this its reason is not read and
 * the run keeps n8n's status as its reason. 200 checks at once hold at most 400 MiB of it.
 */
const DETAIL_MAX_BYTES = 2 * 1024 * 1024;
/**
 * A workflow comes whole (a big Code node, twice for an active one), but its top-level `name`
 * comes before the nodes: past this only the beginning is read and the name taken from it.
 */
const WORKFLOW_MAX_BYTES = 256 * 1024;
/** Runs followed by id at once; past it the never-stored go first, then the oldest, and the log says so. */
const MAX_TRACKED = 2000;
const MAX_DETAILS = 500;
/** Ids missing from the list kept to be looked up, in all (a hole is kept as a range of ids). */
const MAX_GAP_IDS = 10_000n;
/** Below the oldest run a first sweep lists lies n8n's pruned history: only this many ids are looked up there. */
const FIRST_SWEEP_TAIL = 50n;
/** Resumed runs remembered until a sweep meets them. */
const MAX_RESUMED = 1000;
/** An id past this is no database id (n8n's are integers of at most 64 bits). */
const MAX_DB_ID = 2n ** 63n - 1n;
/**
 * An id this far above both the last sweep's top and the next listed id is an outlier (a broken
 * answer), never a position: as the sweep's top it would hide every run below it for good.
 */
const MAX_ID_JUMP = 1_000_000n;

const numeric = (s: string | undefined): s is string => !!s && /^\d{1,30}$/.test(s);
const isoDate = (v: unknown): Date | null => {
  if (typeof v !== "string") return null;
  const d = new Date(v);
  return Number.isFinite(d.getTime()) ? d : null;
};
/** n8n's own cursor: standard base64 of `{"lastId":"<id>","limit":<n>}`. */
const n8nCursor = (lastId: string) =>
  Buffer.from(JSON.stringify({ lastId, limit: MAX_PAGE })).toString("base64");

export interface WorkflowATarget {
  baseUrl: string;
  apiKey: string;
}

function base(t: WorkflowATarget) {
  return t.baseUrl.replace(/\/+$/, "");
}

/**
 * `GET /api/v1/executions?limit=1` with the key: an answer that stays a few hundred bytes
 * whatever the workflows hold, and that only an instance whose API is mounted and whose database
 * answers can give. An answer is the whole check (one request): its time is the check's response
 * time. 401/403 is a bad key. Only when the API answers with a failure is readiness asked (or
 * health, where readiness is not offered), so the failure says which it is: an instance
 * restarting (readiness 503) or its API alone; no answer at all (a timeout, a refused or reset
 * connection) is the verdict by itself, without a second wait on the same host. A ready
 * instance whose API answered more than expected is up: it is recorded as available with the
 * reason, never as an outage.
 *
 * With `listPage` (a sync follows and its sweep starts at the newest run), the sweep's own first
 * page, `?limit=250`, is asked after the check's request and its body comes back as `page` for
 * the sync (syncWorkflowA's `firstPage`); the check's verdict and time stay the small request's,
 * so a check syncing and one not are measured alike.
 */
export async function checkWorkflowA(
  agent: Agent,
  t: WorkflowATarget,
  timeoutMs: number,
  listPage = false,
): Promise<CheckResult & { page?: unknown }> {
  const ask = (limit: number) =>
    probeHttp(agent, `${base(t)}/api/v1/executions?limit=${limit}`, {
      timeoutMs,
      headers: { "X-N8N-API-KEY": t.apiKey },
      json: true,
      // a list page is bounded as the sync bounds its pages
      maxBytes: limit === 1 ? CHECK_MAX_BYTES : DEFAULT_MAX_BYTES,
    });
  const api = await ask(1);
  if (api.ok) {
    let page: unknown;
    if (listPage) {
      // a list page that is slow, too large or refused says nothing of whether the platform is up
      const list = await ask(MAX_PAGE);
      if (list.ok) page = list.body;
    }
    return {
      available: true,
      responseTimeMs: api.ms,
      statusCode: api.status,
      ...(page === undefined ? {} : { page }),
    };
  }
  if (api.status === 401 || api.status === 403)
    return {
      available: false,
      responseTimeMs: api.ms,
      statusCode: api.status,
      reason: "bad_credentials",
      error: `the API rejected the api_key (HTTP ${api.status})`,
    };
  if (api.status === 429) return { available: true, responseTimeMs: api.ms, statusCode: 429 };
  // No answer at all (timeout, refused, reset): readiness would wait on the same dead host, up to
  // another timeout holding a probe slot; the API's failure is the verdict.
  if (api.status === undefined) return failure(api);
  // The API answered with a failure: readiness says whether the instance is starting or down.
  let health = await probeHttp(agent, `${base(t)}/healthz/readiness`, {
    timeoutMs,
    maxBytes: HEALTH_MAX_BYTES,
  });
  if (!health.ok && health.status === 404)
    health = await probeHttp(agent, `${base(t)}/healthz`, { timeoutMs, maxBytes: HEALTH_MAX_BYTES });
  if (!health.ok) return failure(health);
  // A ready instance whose API answered more than expected is up (a big answer is no outage).
  if (api.reason === "response_too_large")
    return {
      available: true,
      responseTimeMs: health.ms,
      statusCode: health.status,
      reason: api.reason,
      error: `the API answered, but ${api.error}`,
    };
  return failure(api);
}

export function failure(r: Extract<HttpOutcome, { ok: false }>): CheckResult {
  return {
    available: false,
    responseTimeMs: r.reason === "timeout" ? null : r.ms,
    ...(r.status === undefined ? {} : { statusCode: r.status }),
    reason: r.reason,
    error: r.error,
  };
}

/**
 * When a run started as n8n says: `startedAt`, or for a queued run (`new`, whose `startedAt` is
 * still null in n8n's ExecutionEntity) its `createdAt`, which only the by-id answer carries.
 */
const startOf = (e: Record<string, unknown>): Date | null => isoDate(e.startedAt) ?? isoDate(e.createdAt);

/**
 * One n8n execution as a platform run, at `first` (the start Vigil stored it at) when given.
 * Null when it has no start the timeline can hold.
 */
function toRun(e: Record<string, unknown>, now: Date, first?: string): PlatformRun | null {
  const id = asId(e.id);
  const ts = first ? new Date(first) : startOf(e);
  if (!id || !plausibleStart(ts, now)) return null;
  const { status, open } = mapWorkflowAStatus(e.status);
  const stoppedAt = open ? null : isoDate(e.stoppedAt);
  const stopped = plausibleStart(stoppedAt, now) ? stoppedAt : null;
  const result = field(field(e, "data"), "resultData");
  const err = field(result, "error");
  const message = text(field(err, "message")) ?? text(field(err, "description"));
  return {
    id,
    ts,
    workflowId: asId(e.workflowId),
    status,
    open,
    mode: text(e.mode, 32),
    stoppedAt: stopped,
    // From the first start: a resumed run's duration includes its wait.
    durationMs: stopped ? Math.max(0, stopped.getTime() - ts.getTime()) : null,
    error:
      status === "error"
        ? (message ??
          (String(e.status) === "crashed"
            ? "the n8n process crashed during the run"
            : `execution ended with status ${String(e.status)}`))
        : null,
    errorNode: status === "error" ? text(field(field(err, "node"), "name"), 200) : null,
    lastNode: text(field(result, "lastNodeExecuted"), 200),
    detailed: result !== undefined,
  };
}

/**
 * Ids the list did not show, as inclusive ranges, newest first, at most MAX_GAP_IDS ids in all
 * (the oldest go past it). Looked up by id a few at a time, newest first.
 */
class Gaps {
  private ranges: { hi: bigint; lo: bigint }[] = [];
  /** Ids dropped at the bound this tick. */
  dropped = 0n;

  constructor(saved: { hi: string; lo: string }[] | undefined) {
    for (const r of saved ?? [])
      if (numeric(r.hi) && numeric(r.lo) && BigInt(r.lo) <= BigInt(r.hi))
        this.ranges.push({ hi: BigInt(r.hi), lo: BigInt(r.lo) });
    this.normalize();
  }

  get size(): bigint {
    return this.ranges.reduce((n, r) => n + r.hi - r.lo + 1n, 0n);
  }

  /** The ids strictly between `above` and `below`; with `nearest`, only that many below `above`. */
  between(above: string | undefined, below: string | undefined, nearest?: bigint): void {
    if (!numeric(above) || !numeric(below)) return;
    const hi = BigInt(above) - 1n;
    let lo = BigInt(below) + 1n;
    if (nearest !== undefined && hi - lo + 1n > nearest) lo = hi - nearest + 1n;
    if (lo > hi) return;
    this.ranges.push({ hi, lo });
    this.normalize();
  }

  /** The newest id still to look up, taken out. */
  take(): string | undefined {
    const r = this.ranges[0];
    if (!r) return undefined;
    const id = r.hi;
    if (r.hi === r.lo) this.ranges.shift();
    else r.hi--;
    return id.toString();
  }

  toState(): { hi: string; lo: string }[] {
    return this.ranges.map((r) => ({ hi: r.hi.toString(), lo: r.lo.toString() }));
  }

  private normalize(): void {
    this.ranges.sort((a, b) => (b.hi > a.hi ? 1 : b.hi < a.hi ? -1 : 0));
    const merged: { hi: bigint; lo: bigint }[] = [];
    for (const r of this.ranges) {
      const last = merged[merged.length - 1];
      if (last && r.hi >= last.lo - 1n) {
        if (r.lo < last.lo) last.lo = r.lo;
      } else merged.push({ ...r });
    }
    let left = MAX_GAP_IDS;
    this.ranges = [];
    for (const r of merged) {
      const n = r.hi - r.lo + 1n;
      if (left <= 0n) {
        this.dropped += n;
        continue;
      }
      if (n > left) {
        this.dropped += n - left;
        this.ranges.push({ hi: r.hi, lo: r.hi - left + 1n });
        left = 0n;
      } else {
        this.ranges.push(r);
        left -= n;
      }
    }
  }
}

/**
 * Whether a listed id may be a sweep position (its top, or the bound of a hole): not past any
 * database id, and not far above both the last sweep's top (`ref`) and the next listed id.
 */
function positional(id: string, next: string | undefined, ref: string | undefined): boolean {
  if (!numeric(id)) return true; // only n8n's numeric ids can be judged; equality still works
  const v = BigInt(id);
  if (v > MAX_DB_ID) return false;
  if (numeric(ref) && v <= BigInt(ref) + MAX_ID_JUMP) return true;
  if (numeric(next)) return v - BigInt(next) <= MAX_ID_JUMP;
  return !numeric(ref);
}

/** Whether `id` is at or below the sweep's floor (numerically for n8n's ids). */
const atOrBelow = (id: string, floor: string | undefined) =>
  !!floor && (id === floor || (numeric(id) && numeric(floor) && BigInt(id) <= BigInt(floor)));

/**
 * One sync tick of a workflow_a connection. Every step is bounded by `budget`, and no request
 * starts after `limits.deadline`; what does not fit is kept in the state and continues at the
 * next tick:
 *
 * 1. Runs followed by id are re-read, least recently read first, until they end. A run that ended
 *    is written at the start Vigil first stored it at, so a resumed run stays one row; one that
 *    the list may still show later is remembered (`resumed`) so a sweep writes it there too.
 * 2. A sweep pages the list from the newest run down to the last sweep's top. It may span ticks:
 *    its cursor is kept (rebuilt from where it stands if n8n refuses it). Holes in the ids below
 *    the top are runs the list hides (running, waiting) or runs of other projects; they are kept
 *    as ranges and looked up by id, a share of the re-read budget each tick.
 * 3. `status=running` adds the running runs the list leaves out.
 * 4. Failed runs get their reason (`includeData=true`), and workflows their names.
 *
 * A 429 or 5xx ends the tick where it is, keeping everything not yet done, and a 429's
 * `Retry-After` is honoured before the next sync.
 *
 * `firstPage`: the body of `GET /executions?limit=250` (no cursor) asked moments ago, by the
 * check (checkWorkflowA's `listPage`): a sweep that starts at the newest run takes it as its
 * first page instead of asking again.
 */
export async function syncWorkflowA(
  agent: Agent,
  t: WorkflowATarget,
  prev: SyncState,
  budget: SyncBudget,
  timeoutMs: number,
  knownNames: ReadonlySet<string>,
  limits: TickLimits,
  firstPage?: unknown,
): Promise<SyncOutcome> {
  const headers = { "X-N8N-API-KEY": t.apiKey };
  const get = (path: string, maxBytes?: number, prefix?: boolean) =>
    probeHttp(agent, `${base(t)}/api/v1${path}`, { timeoutMs, headers, json: true, maxBytes, prefix });
  const now = limits.now;
  const tick = (prev.ticks ?? 0) + 1;
  const runs = new Map<string, PlatformRun>();
  const tracked = new Map<string, TrackedRun>((prev.tracked ?? []).map((r) => [r.id, { ...r }]));
  for (const id of prev.open ?? []) if (!tracked.has(id)) tracked.set(id, { id, stored: true });
  const details = new Map<string, string | undefined>((prev.details ?? []).map((d) => [d.id, d.ts]));
  const resumed = new Map<string, string>((prev.resumed ?? []).map((r) => [r.id, r.ts]));
  const gaps = new Gaps(prev.gaps);
  const out: SyncOutcome = {
    runs: [],
    names: [],
    state: { ...prev },
    requests: 0,
    stoppedBy: null,
    warnings: [],
  };
  delete out.state.open;
  out.state.ticks = tick;

  const stop = (r: Extract<HttpOutcome, { ok: false }>) => {
    const throttled = r.status === 429 || (r.status !== undefined && r.status >= 500);
    if (!throttled) return false;
    out.stoppedBy = `HTTP ${r.status}`;
    if (r.retryAfterMs) out.retryAfterMs = r.retryAfterMs;
    return true;
  };
  /** Checked before every request: the tick ended (throttled) or its time ran out. */
  const halted = () => {
    if (!out.stoppedBy && Date.now() >= limits.deadline) out.stoppedBy = "deadline";
    return out.stoppedBy !== null;
  };
  /** The start a run was stored at, by this tick or an earlier one. */
  const firstTs = (id: string) =>
    tracked.get(id)?.ts ?? runs.get(id)?.ts.toISOString() ?? resumed.get(id) ?? details.get(id);
  const keep = (run: PlatformRun, own: Date | null) => {
    if (run.open)
      tracked.set(run.id, {
        id: run.id,
        ts: run.ts.toISOString(),
        stored: true,
        workflowId: run.workflowId,
        readTick: tick,
      });
    else {
      tracked.delete(run.id);
      // Ended at a start n8n no longer shows (it resumed since): a sweep that lists it later
      // must write it at the stored start, not make a second row at the new one.
      if (own && own.getTime() !== run.ts.getTime()) resumed.set(run.id, run.ts.toISOString());
    }
    if (run.status === "error" && !run.detailed) details.set(run.id, run.ts.toISOString());
    runs.set(run.id, run);
  };
  /** One execution from any answer: stored, or "untimed" when it has no start yet (queued), or not one at all. */
  const take = (e: unknown): "kept" | "untimed" | "invalid" => {
    if (!isRecord(e)) return "invalid";
    const id = asId(e.id);
    if (!id) return "invalid";
    const run = toRun(e, now, firstTs(id));
    if (!run) return "untimed";
    keep(run, startOf(e));
    return "kept";
  };
  /** Listed without a start: followed by id, whose answer has `createdAt`. */
  const follow = (e: unknown) => {
    const id = asId(field(e, "id"));
    if (id && !tracked.has(id) && !runs.has(id)) tracked.set(id, { id, stored: false });
  };

  let reReads = 0;
  const byId = async (id: string, withData: boolean) => {
    out.requests++;
    const r = await get(
      `/executions/${encodeURIComponent(id)}${withData ? "?includeData=true" : ""}`,
      withData ? DETAIL_MAX_BYTES : undefined,
    );
    if (r.ok) return take(r.body) === "kept" ? "done" : "unusable";
    if (r.status === 404) return "gone";
    if (stop(r)) return "stop";
    return "failed";
  };

  // 1. Re-read what is followed, least recently read first (never read before all), so that
  // every followed run gets its turn however many there are. A share of the budget is kept for
  // the holes when there are any.
  const holeShare = gaps.size > 0n ? Math.ceil(budget.reReads / 4) : 0;
  const order = [...tracked.values()].sort(
    (a, b) => (a.readTick ?? -1) - (b.readTick ?? -1) || cmpId(a.id, b.id),
  );
  for (const tr of order) {
    if (reReads >= budget.reReads - holeShare || halted()) break;
    reReads++;
    const res = await byId(tr.id, false);
    if (res === "gone") {
      tracked.delete(tr.id);
      // Stored as unfinished, then deleted or pruned on the platform: say so instead of "running" forever.
      if (tr.stored && tr.ts)
        runs.set(tr.id, {
          id: tr.id,
          ts: new Date(tr.ts),
          workflowId: tr.workflowId ?? null,
          status: "unknown",
          open: false,
          mode: null,
          stoppedAt: null,
          durationMs: null,
          error: "the run is no longer on the platform (deleted or pruned before it ended)",
          errorNode: null,
          lastNode: null,
          detailed: true,
        });
    } else if (res === "unusable" && !tr.stored) tracked.delete(tr.id);
    else if (res !== "done") {
      // Not read this time: it goes behind the others, so one bad run cannot take every turn.
      const cur = tracked.get(tr.id);
      if (cur && res !== "stop") cur.readTick = tick;
    }
  }

  // 2. The sweep: newest first, down to the previous top (the floor).
  const sweep = prev.sweep ?? { floor: prev.highWater };
  const firstSweep = !sweep.floor;
  let cursor = prev.sweep?.cursor ?? null;
  let top = prev.sweep?.top;
  let low = prev.sweep?.low;
  let pages = 0;
  let done = false;
  let restarted = false;
  let given = cursor === null ? firstPage : undefined;
  while (pages < budget.pages && !halted()) {
    pages++;
    let r: HttpOutcome;
    if (given !== undefined) {
      r = { ok: true, status: 200, body: given, ms: 0 };
      given = undefined;
    } else {
      out.requests++;
      r = await get(`/executions?limit=${MAX_PAGE}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`);
    }
    if (!r.ok) {
      if (stop(r)) break;
      // n8n refuses a cursor it cannot read (a saved one from another version, a corrupted
      // state) with a 4xx, and would forever: build it again from where the sweep stands, as
      // n8n does, and if that is refused too, sweep again from the newest run. (A 401 or 403
      // is about the key, not the cursor: the sweep keeps its place.)
      const refused = r.status !== undefined && r.status >= 400 && r.status < 500;
      if (cursor && refused && r.status !== 401 && r.status !== 403) {
        if (numeric(low) && cursor !== n8nCursor(low)) cursor = n8nCursor(low);
        else {
          cursor = null;
          top = undefined;
          low = undefined;
          restarted = true;
        }
        continue;
      }
      break;
    }
    const data = field(r.body, "data");
    const list: unknown[] = Array.isArray(data) ? data : [];
    const ids = list.map((e) => asId(field(e, "id")));
    let reached = false;
    for (const [k, e] of list.entries()) {
      const id = ids[k];
      if (!id) continue;
      if (atOrBelow(id, sweep.floor)) {
        gaps.between(low ?? top, sweep.floor);
        reached = true;
        break;
      }
      const below = ids.slice(k + 1).find((x): x is string => !!x);
      if (positional(id, below, sweep.floor)) {
        top ??= id;
        gaps.between(low, id);
        low = id;
      }
      if (take(e) === "untimed") follow(e);
      resumed.delete(id); // met: a later sweep starts above it
    }
    const next = field(r.body, "nextCursor");
    cursor = typeof next === "string" && next ? next : null;
    if (reached || !cursor) {
      // The list's end: below it, down to the floor, runs may hide. Below a first sweep's end
      // lies the history n8n pruned, so only the nearest ids are looked up there.
      if (!reached) gaps.between(low ?? top, sweep.floor ?? "0", firstSweep ? FIRST_SWEEP_TAIL : undefined);
      done = true;
      break;
    }
  }
  if (done) {
    out.state.highWater = top ?? prev.highWater;
    delete out.state.sweep;
  } else if (cursor) {
    out.state.sweep = {
      ...(top ? { top } : {}),
      cursor,
      ...(sweep.floor ? { floor: sweep.floor } : {}),
      ...(low ? { low } : {}),
    };
  } else if (restarted) delete out.state.sweep; // the next tick sweeps from the newest run
  // (otherwise nothing was read: the sweep stays as it was)

  // 3. Running runs the list leaves out. (Waiting ones are hidden even from status=waiting while
  // the process that paused them lives, and listed normally after a restart: the holes find them.)
  if (!halted()) {
    out.requests++;
    const r = await get(`/executions?status=running&limit=${MAX_PAGE}`);
    // n8n versions that refuse a status filter answer 400: the holes still find those runs.
    if (!r.ok) stop(r);
    else {
      const list = field(r.body, "data");
      for (const e of Array.isArray(list) ? list : []) if (take(e) === "untimed") follow(e);
    }
  }

  // Runs first met this tick without a start, then the holes, with what is left of the re-read
  // budget (the holes' share included).
  for (const tr of [...tracked.values()].filter((x) => !x.stored && x.readTick === undefined)) {
    if (reReads >= budget.reReads || halted()) break;
    reReads++;
    const res = await byId(tr.id, false);
    if (res === "gone" || res === "unusable") tracked.delete(tr.id);
    else if (res === "failed") tr.readTick = tick;
  }
  while (reReads < budget.reReads && !halted()) {
    const id = gaps.take();
    if (id === undefined) break;
    if (tracked.has(id) || runs.has(id)) continue;
    reReads++;
    const res = await byId(id, false);
    // Not answered now: followed by id like any run, so it is asked again.
    if (res === "failed" || res === "stop") tracked.set(id, { id, stored: false, readTick: tick });
  }

  // 4. Failure reasons, newest first.
  let detailed = 0;
  for (const [id] of [...details].sort((a, b) => cmpId(b[0], a[0]))) {
    if (detailed >= budget.details || halted()) break;
    detailed++;
    const res = await byId(id, true);
    if (res !== "stop") details.delete(id);
  }
  for (const run of runs.values()) if (run.detailed) details.delete(run.id);

  // Names of workflows not known yet. Only the beginning of a big workflow is read: its
  // top-level name comes before the nodes.
  const wanted = [
    ...new Set([...runs.values()].map((r) => r.workflowId).filter((w): w is string => !!w)),
  ].filter((w) => !knownNames.has(w));
  for (const wf of wanted.slice(0, budget.names)) {
    if (halted()) break;
    out.requests++;
    const r = await get(
      `/workflows/${encodeURIComponent(wf)}?excludePinnedData=true`,
      WORKFLOW_MAX_BYTES,
      true,
    );
    if (r.ok) {
      const raw = r.truncated ? topLevelString(String(r.body), "name") : field(r.body, "name");
      const name = text(raw, 500);
      if (name) out.names.push({ workflowId: wf, name });
    } else stop(r);
  }

  out.runs = [...runs.values()];
  keepState(out, { tracked, details, resumed, gaps });
  return out;
}

/** The bounded state a tick leaves: what is dropped at a bound is said in `warnings`. */
function keepState(
  out: SyncOutcome,
  s: {
    tracked: Map<string, TrackedRun>;
    details: Map<string, string | undefined>;
    resumed: Map<string, string>;
    gaps: Gaps;
  },
): void {
  const state = out.state;
  // Past the bound, ids never stored go first (most are other projects' runs), then the oldest.
  const tracked = [...s.tracked.values()].sort((a, b) =>
    a.stored === b.stored ? cmpId(b.id, a.id) : a.stored ? -1 : 1,
  );
  const dropped = tracked.splice(MAX_TRACKED);
  if (dropped.length) {
    const stored = dropped.filter((r) => r.stored).length;
    out.warnings.push(
      `stopped following ${dropped.length} runs past ${MAX_TRACKED} (${stored} stored as unfinished ` +
        `stay as last read: ${dropped
          .filter((r) => r.stored)
          .slice(0, 5)
          .map((r) => r.id)
          .join(", ")}${stored > 5 ? ", …" : ""})`,
    );
  }
  state.tracked = tracked.sort((a, b) => cmpId(b.id, a.id));
  const details = [...s.details].sort((a, b) => cmpId(b[0], a[0]));
  if (details.length > MAX_DETAILS)
    out.warnings.push(
      `${details.length - MAX_DETAILS} failed runs keep n8n's status as their reason (over ${MAX_DETAILS} waiting)`,
    );
  state.details = details.slice(0, MAX_DETAILS).map(([id, ts]) => (ts ? { id, ts } : { id }));
  if (s.gaps.dropped > 0n)
    out.warnings.push(`${s.gaps.dropped} ids missing from the list were not looked up (over ${MAX_GAP_IDS})`);
  state.gaps = s.gaps.toState();

  // Resumed runs a sweep can still meet: above the floor of the next one, and not in the part
  // of the open sweep already read.
  const floor = state.sweep ? state.sweep.floor : state.highWater;
  const { top, low } = state.sweep ?? {};
  const ahead = (id: string) => {
    if (!numeric(id)) return true;
    const v = BigInt(id);
    if (numeric(floor) && v <= BigInt(floor)) return false;
    return !(numeric(top) && numeric(low) && v >= BigInt(low) && v <= BigInt(top));
  };
  state.resumed = [...s.resumed]
    .filter(([id]) => ahead(id))
    .sort((a, b) => cmpId(b[0], a[0]))
    .slice(0, MAX_RESUMED)
    .map(([id, ts]) => ({ id, ts }));

  if (!state.tracked.length) delete state.tracked;
  if (!state.details.length) delete state.details;
  if (!state.gaps.length) delete state.gaps;
  if (!state.resumed.length) delete state.resumed;
}

/**
 * A top-level string member of a JSON object from the beginning of its text (a body cut at a
 * bound): scans the text keeping track of nesting and strings, so a node's `name` is never taken
 * for the workflow's. Undefined when the member is not in the part read.
 */
export function topLevelString(json: string, key: string): string | undefined {
  let depth = 0;
  let i = 0;
  /** The JSON string starting at `i` (a quote), or undefined when the text ends inside it. */
  const readString = (): string | undefined => {
    let j = i + 1;
    while (j < json.length && json[j] !== '"') j += json[j] === "\\" ? 2 : 1;
    if (j >= json.length) return undefined;
    const raw = json.slice(i, j + 1);
    i = j + 1;
    try {
      return JSON.parse(raw) as string;
    } catch {
      return undefined;
    }
  };
  while (i < json.length) {
    const c = json[i] as string;
    if (c === '"') {
      const s = readString();
      if (s === undefined) return undefined;
      if (depth !== 1 || s !== key) continue;
      // A key at the top level: `"name" : "…"`.
      while (/\s/.test(json[i] ?? "")) i++;
      if (json[i] !== ":") continue;
      i++;
      while (/\s/.test(json[i] ?? "")) i++;
      if (json[i] !== '"') return undefined;
      return readString();
    }
    if (c === "{" || c === "[") depth++;
    else if (c === "}" || c === "]") depth--;
    i++;
  }
  return undefined;
}

/** Numeric ids by value, others as text. */
export function cmpId(a: string, b: string): number {
  if (numeric(a) && numeric(b)) {
    const x = BigInt(a);
    const y = BigInt(b);
    return x < y ? -1 : x > y ? 1 : 0;
  }
  return a < b ? -1 : a > b ? 1 : 0;
}
