import type { Agent } from "undici";
import { type HttpOutcome, probeHttp } from "./http.js";
import {
  asId,
  type CheckResult,
  type PlatformRun,
  type SyncBudget,
  type SyncOutcome,
  type SyncState,
  text,
  type TrackedRun,
} from "./platform.js";

/**
 * `workflow_a`: a self-hosted n8n instance through its public API (`/api/v1`, header
 * `X-N8N-API-KEY`). What this adapter relies on was observed on a real n8n 1.123 (README:
 * "Platforms as they really behave"):
 *
 * - `GET /api/v1/executions` lists runs newest id first, `limit` at most 250, keyset pages through
 *   `nextCursor`. Runs its process still holds are left out: running ones appear only with
 *   `status=running`, waiting ones not at all. Ids are increasing integers (as strings).
 * - A waiting run that resumes gets a new `startedAt`; its id stays.
 * - `GET /api/v1/executions/{id}` answers any run the key may see, finished or not; 404 once it is
 *   deleted or pruned. `includeData=true` adds the run data, where a failure's message, failing
 *   node and last node are (`data.resultData.error`, `.lastNodeExecuted`).
 * - `/api/v1/workflows` returns whole workflow bodies (megabytes are possible), so the check
 *   never reads it; names come one workflow at a time, bounded per tick.
 * - Right after a start `/healthz` answers before the API is mounted; `/healthz/readiness` says
 *   when it is (older versions lack it: 404 there falls back to `/healthz`).
 */

interface N8nExecution {
  id?: unknown;
  workflowId?: unknown;
  status?: unknown;
  finished?: unknown;
  mode?: unknown;
  startedAt?: unknown;
  stoppedAt?: unknown;
  waitTill?: unknown;
  data?: {
    resultData?: {
      error?: { message?: unknown; description?: unknown; node?: { name?: unknown } };
      lastNodeExecuted?: unknown;
    };
  };
}

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
  const known = WORKFLOW_A_STATUSES[s];
  if (known) return known;
  return { status: s ? s.replace(/[^a-z0-9_-]/g, "").slice(0, 32) || "unknown" : "unknown", open: false };
}

const MAX_PAGE = 250;
/** The answer of the authenticated check request is small by construction; more is not n8n. */
const CHECK_MAX_BYTES = 256 * 1024;
/** A failed run's data (every node's output) can be large; past this its reason is not read. */
const DETAIL_MAX_BYTES = 8 * 1024 * 1024;
const WORKFLOW_MAX_BYTES = 16 * 1024 * 1024;
/** Unfinished runs followed at once, and failed runs whose reason waits; older ones past it are dropped. */
const MAX_TRACKED = 2000;
const MAX_DETAILS = 500;
/** Ids missing between two listed runs are looked up when the hole is at most this wide. */
const MAX_GAP = 50;

const numeric = (s: string | undefined): s is string => !!s && /^\d{1,30}$/.test(s);
const isoDate = (v: unknown): Date | null => {
  if (typeof v !== "string") return null;
  const d = new Date(v);
  return Number.isFinite(d.getTime()) ? d : null;
};

export interface WorkflowATarget {
  baseUrl: string;
  apiKey: string;
}

function base(t: WorkflowATarget) {
  return t.baseUrl.replace(/\/+$/, "");
}

/**
 * Readiness (or health, where readiness is not offered), then `GET /api/v1/executions?limit=1`
 * with the key: an answer that stays a few hundred bytes whatever the workflows hold. 401/403 is
 * a bad key. An answer larger than expected still proves the platform up: it is recorded as
 * available with the reason, never as an outage.
 */
export async function checkWorkflowA(
  agent: Agent,
  t: WorkflowATarget,
  timeoutMs: number,
): Promise<CheckResult> {
  let health = await probeHttp(agent, `${base(t)}/healthz/readiness`, { timeoutMs });
  if (!health.ok && health.status === 404)
    health = await probeHttp(agent, `${base(t)}/healthz`, { timeoutMs });
  if (!health.ok) return failure(health);
  const api = await probeHttp(agent, `${base(t)}/api/v1/executions?limit=1`, {
    timeoutMs,
    headers: { "X-N8N-API-KEY": t.apiKey },
    json: true,
    maxBytes: CHECK_MAX_BYTES,
  });
  if (api.ok || api.reason === "response_too_large")
    return {
      available: true,
      responseTimeMs: health.ms,
      statusCode: health.status,
      ...(api.ok ? {} : { reason: api.reason, error: `the API answered, but ${api.error}` }),
    };
  if (api.status === 401 || api.status === 403)
    return {
      available: false,
      responseTimeMs: health.ms,
      statusCode: api.status,
      reason: "bad_credentials",
      error: `the API rejected the api_key (HTTP ${api.status})`,
    };
  if (api.status === 429) return { available: true, responseTimeMs: health.ms, statusCode: 429 };
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

/** One n8n execution as a platform run; `ts` keeps the start Vigil stored it at, if any. */
function toRun(e: N8nExecution, keepTs?: string): PlatformRun | null {
  const id = asId(e.id);
  const started = isoDate(e.startedAt);
  if (!id || !started) return null;
  const { status, open } = mapWorkflowAStatus(e.status);
  const stopped = open ? null : isoDate(e.stoppedAt);
  const ts = keepTs ? new Date(keepTs) : started;
  const result = e.data?.resultData;
  const err = result?.error;
  const message = text(err?.message) ?? text(err?.description);
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
    errorNode: status === "error" ? text(err?.node?.name, 200) : null,
    lastNode: text(result?.lastNodeExecuted, 200),
    detailed: result !== undefined,
  };
}

/**
 * One sync tick of a workflow_a connection. Every step is bounded by `budget`; what does not fit
 * is kept in the state and continues at the next tick:
 *
 * 1. Runs tracked as unfinished are re-read by id (oldest first) until they end. A run that ended
 *    is written at the start Vigil first stored it at, so a resumed run stays one row.
 * 2. A sweep pages the list from the newest run down to the last sweep's top. It may span ticks:
 *    its cursor is kept. Holes in the ids below the top are runs the list hides (running,
 *    waiting) or runs of other projects; each is looked up once by id and tracked if unfinished.
 * 3. `status=running` adds the running runs the list leaves out.
 * 4. Failed runs get their reason (`includeData=true`), and workflows their names.
 *
 * A 429 or 5xx ends the tick where it is, keeping everything not yet done, and a 429's
 * `Retry-After` is honoured before the next sync.
 */
export async function syncWorkflowA(
  agent: Agent,
  t: WorkflowATarget,
  prev: SyncState,
  budget: SyncBudget,
  timeoutMs: number,
  knownNames: ReadonlySet<string>,
): Promise<SyncOutcome> {
  const headers = { "X-N8N-API-KEY": t.apiKey };
  const get = (path: string, maxBytes?: number) =>
    probeHttp(agent, `${base(t)}/api/v1${path}`, { timeoutMs, headers, json: true, maxBytes });
  const runs = new Map<string, PlatformRun>();
  const tracked = new Map<string, TrackedRun>((prev.tracked ?? []).map((r) => [r.id, r]));
  for (const id of prev.open ?? []) if (!tracked.has(id)) tracked.set(id, { id, stored: true });
  const details = new Map<string, string | undefined>((prev.details ?? []).map((d) => [d.id, d.ts]));
  const out: SyncOutcome = { runs: [], names: [], state: { ...prev }, requests: 0, stoppedBy: null };
  delete out.state.open;

  const stop = (r: Extract<HttpOutcome, { ok: false }>) => {
    const throttled = r.status === 429 || (r.status !== undefined && r.status >= 500);
    if (!throttled) return false;
    out.stoppedBy = `HTTP ${r.status}`;
    if (r.retryAfterMs) out.retryAfterMs = r.retryAfterMs;
    return true;
  };
  const keep = (run: PlatformRun) => {
    // Stored before (or met earlier this tick) at its first start: keep that row, with the
    // duration from it, even when the list now shows the resumed start.
    const first = tracked.get(run.id)?.ts ?? runs.get(run.id)?.ts.toISOString();
    if (first && run.ts.toISOString() !== first) {
      run.ts = new Date(first);
      run.durationMs = run.stoppedAt ? Math.max(0, run.stoppedAt.getTime() - run.ts.getTime()) : null;
    }
    if (run.open) tracked.set(run.id, { id: run.id, ts: run.ts.toISOString(), stored: true });
    else tracked.delete(run.id);
    if (run.status === "error" && !run.detailed) details.set(run.id, run.ts.toISOString());
    runs.set(run.id, run);
  };

  // 1. Re-read what is tracked, oldest first.
  let reReads = 0;
  const byId = async (id: string, withData: boolean): Promise<"done" | "gone" | "stop" | "skip"> => {
    out.requests++;
    const r = await get(
      `/executions/${encodeURIComponent(id)}${withData ? "?includeData=true" : ""}`,
      withData ? DETAIL_MAX_BYTES : undefined,
    );
    if (r.ok) {
      const run = toRun(r.body as N8nExecution, tracked.get(id)?.ts ?? details.get(id));
      if (!run) return "skip";
      keep(run);
      return "done";
    }
    if (r.status === 404) return "gone";
    if (stop(r)) return "stop";
    return "skip";
  };
  const order = [...tracked.values()].sort((a, b) => cmpId(a.id, b.id));
  for (const tr of order) {
    if (out.stoppedBy || reReads >= budget.reReads) break;
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
    }
  }

  // 2. The sweep: newest first, down to the previous top (the floor).
  const sweep = prev.sweep ?? { floor: prev.highWater };
  let cursor = prev.sweep?.cursor ?? null;
  let top = prev.sweep?.top;
  let low = prev.sweep?.low;
  let pages = 0;
  let done = false;
  const holes: string[] = [];
  const noteHole = (above: string | undefined, below: string | undefined) => {
    if (!numeric(above) || !numeric(below)) return;
    const hi = BigInt(above);
    const lo = BigInt(below);
    if (hi - lo <= 1n || hi - lo - 1n > BigInt(MAX_GAP)) return;
    for (let i = hi - 1n; i > lo; i--) holes.push(i.toString());
  };
  while (!out.stoppedBy && pages < budget.pages) {
    pages++;
    out.requests++;
    const r = await get(
      `/executions?limit=${MAX_PAGE}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`,
    );
    if (!r.ok) {
      stop(r);
      break;
    }
    const body = r.body as { data?: unknown; nextCursor?: unknown };
    const list = Array.isArray(body.data) ? (body.data as N8nExecution[]) : [];
    let reached = false;
    for (const e of list) {
      const id = asId(e.id);
      if (!id) continue;
      if (
        sweep.floor &&
        (id === sweep.floor || (numeric(id) && numeric(sweep.floor) && BigInt(id) <= BigInt(sweep.floor)))
      ) {
        noteHole(low ?? top, sweep.floor);
        reached = true;
        break;
      }
      top ??= id;
      noteHole(low, id);
      low = id;
      const run = toRun(e, tracked.get(id)?.ts);
      if (run) keep(run);
    }
    cursor = typeof body.nextCursor === "string" && body.nextCursor ? body.nextCursor : null;
    if (reached || !cursor) {
      // The list's end: below it, down to the floor (or the first id n8n gives, 1), runs may hide.
      if (!reached) noteHole(low ?? top, sweep.floor ?? "0");
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
  }
  for (const id of holes) if (!tracked.has(id) && !runs.has(id)) tracked.set(id, { id, stored: false });

  // 3. Running runs the list leaves out. (Waiting ones are hidden even from status=waiting while
  // the process that paused them lives, and listed normally after a restart: the holes find them.)
  for (const status of ["running"]) {
    if (out.stoppedBy) break;
    out.requests++;
    const r = await get(`/executions?status=${status}&limit=${MAX_PAGE}`);
    if (!r.ok) {
      stop(r);
      continue; // n8n versions that refuse a status filter answer 400: the holes still find them
    }
    const list = (r.body as { data?: unknown }).data;
    for (const e of Array.isArray(list) ? (list as N8nExecution[]) : []) {
      const run = toRun(e, tracked.get(String(e.id))?.ts);
      if (run) keep(run);
    }
  }

  // Holes found this tick are looked up with what is left of the re-read budget.
  for (const tr of [...tracked.values()].filter((x) => !x.stored && !runs.has(x.id))) {
    if (out.stoppedBy || reReads >= budget.reReads) break;
    reReads++;
    const res = await byId(tr.id, false);
    if (res === "gone") tracked.delete(tr.id);
  }

  // 4. Failure reasons, newest first.
  let detailed = 0;
  for (const [id] of [...details].sort((a, b) => cmpId(b[0], a[0]))) {
    if (out.stoppedBy || detailed >= budget.details) break;
    detailed++;
    const res = await byId(id, true);
    if (res !== "stop") details.delete(id);
  }
  for (const run of runs.values()) if (run.detailed) details.delete(run.id);

  // Names of workflows not known yet.
  const wanted = [
    ...new Set([...runs.values()].map((r) => r.workflowId).filter((w): w is string => !!w)),
  ].filter((w) => !knownNames.has(w));
  for (const wf of wanted.slice(0, budget.names)) {
    if (out.stoppedBy) break;
    out.requests++;
    const r = await get(`/workflows/${encodeURIComponent(wf)}?excludePinnedData=true`, WORKFLOW_MAX_BYTES);
    if (r.ok) {
      const name = text((r.body as { name?: unknown }).name, 500);
      if (name) out.names.push({ workflowId: wf, name });
    } else stop(r);
  }

  out.runs = [...runs.values()];
  out.state.tracked = [...tracked.values()].sort((a, b) => cmpId(b.id, a.id)).slice(0, MAX_TRACKED);
  out.state.details = [...details]
    .sort((a, b) => cmpId(b[0], a[0]))
    .slice(0, MAX_DETAILS)
    .map(([id, ts]) => (ts ? { id, ts } : { id }));
  if (!out.state.tracked.length) delete out.state.tracked;
  if (!out.state.details.length) delete out.state.details;
  return out;
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
