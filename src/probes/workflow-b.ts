import type { Agent } from "undici";
import { type HttpOutcome, probeHttp } from "./http.js";
import {
  asId,
  duration,
  field,
  isRecord,
  type PlatformRun,
  plausibleStart,
  type SyncBudget,
  type SyncOutcome,
  type SyncState,
  text,
  type TickLimits,
} from "./platform.js";

/**
 * `workflow_b`: a Make account through its public API v2 (`Authorization: Token …`), as Make's
 * documentation describes it (developers.make.com/api-documentation; cited per point in
 * src/sim/workflow-b.ts, which reproduces it):
 *
 * - `{api}` is `https://{zone}/api/v2`, the zone being the organization's region (eu1, eu2, us1,
 *   us2 on make.com; eu1, us1 on make.celonis.com).
 * - `GET /scenarios?teamId=…&pg[offset]=…&pg[limit]=…` lists a team's scenarios with their names.
 * - `GET /scenarios/{id}/logs?from=…&to=…&pg[limit]=…&pg[last]=…` lists a scenario's runs newest
 *   first (sorted by `imtId`, `<epoch-ms>_scenario.<id>.<type>.<executionId>`), keyset paged by the
 *   last `imtId`; a log's `id` is the execution id; `status` 1 success, 2 warning, 3 error (0
 *   pending, in Make's SDK). A failed run's log may carry `error {name, message, causeModule}`;
 *   otherwise `GET /scenarios/{id}/executions/{executionId}` has it.
 * - Rate limits are per organization (60 requests a minute on Core, 120 Pro, 240 Teams, 1,000
 *   Enterprise); over it, 429, often as plain text and without `Retry-After`.
 *
 * So a tick spends at most `budget.pages` requests here (8: one eighth of a Core organization's
 * minute), visiting scenarios in turn; each scenario keeps its own position. One scenario's
 * failing logs (a 403 for a scope, a 400, a timeout) never hold up the others.
 */

export interface WorkflowBTarget {
  api: string;
  apiToken: string;
  teamId: string;
}

/** Make's log statuses on the spec's five. */
export const WORKFLOW_B_STATUSES: Record<number, { status: string; open: boolean; note: string }> = {
  0: { status: "running", open: true, note: "pending (Make's SDK); not listed by Make's documentation" },
  1: { status: "success", open: false, note: "" },
  2: { status: "success", open: false, note: "completed with warnings; `error` says which" },
  3: { status: "error", open: false, note: "" },
};

export function mapWorkflowBStatus(raw: unknown): { status: string; open: boolean } {
  const n =
    typeof raw === "number" ? raw : typeof raw === "string" && /^\d{1,9}$/.test(raw) ? Number(raw) : NaN;
  const known = Object.hasOwn(WORKFLOW_B_STATUSES, n) ? WORKFLOW_B_STATUSES[n] : undefined;
  if (known) return { status: known.status, open: known.open };
  return { status: Number.isSafeInteger(n) ? `status_${n}` : "unknown", open: false };
}

/** Logs re-read from this far before the last sweep's end: a run's log may be written up to its end. */
export const LOG_OVERLAP_MS = 45 * 60_000;
/** A scenario's first visit reaches back this far. */
const FIRST_SYNC_MS = 24 * 3_600_000;
/** The scenario list is read again this long after the last complete listing (new scenarios, renames). */
const SCENARIOS_TTL_MS = 10 * 60_000;
const LOG_PAGE = 50;
const SCENARIO_PAGE = 100;
const MAX_SCENARIOS = 5000;
/** A scenario whose logs fail this many times in a row is set aside for a while (doubling, at most 6 h). */
const SCENARIO_FAILURES = 3;
const SET_ASIDE_MS = 10 * 60_000;
const MAX_SET_ASIDE_MS = 6 * 3_600_000;
/** Failed runs whose reason is still to be read; the oldest go past it. */
const MAX_PENDING = 500;
/** A reason that will not come after this many tries is given up (the run keeps Make's status as its reason). */
const DETAIL_TRIES = 3;
/**
 * Executions whose reason came from their details: re-read in the overlap, their log (without
 * an error object) must not write the generic reason over it. The newest this many are kept:
 * far more failures than fit in 45 minutes of a busy organization's budget.
 */
const MAX_DETAILED = 2000;
/** Failures of these kinds mean Make cannot be reached at all: the tick ends, no scenario is blamed. */
const UNREACHABLE = new Set(["connection_refused", "dns", "tls", "connection_reset", "network", "refused"]);

function toRun(l: Record<string, unknown>, scenarioId: string, now: Date): PlatformRun | null {
  const id = asId(l.id);
  const ts = typeof l.timestamp === "string" ? new Date(l.timestamp) : null;
  if (!id || !plausibleStart(ts, now)) return null;
  const { status, open } = mapWorkflowBStatus(l.status);
  const took = open ? null : duration(l.duration);
  const err = l.error;
  const message = text(field(err, "message")) ?? text(field(err, "name"));
  const failed = status === "error" || Number(l.status) === 2;
  return {
    id,
    ts,
    workflowId: scenarioId,
    status,
    open,
    mode: text(l.type, 32),
    stoppedAt: took === null ? null : new Date(ts.getTime() + took),
    durationMs: took,
    error: failed
      ? (message ?? (status === "error" ? "scenario run ended with an error" : "completed with warnings"))
      : null,
    errorNode: failed ? text(field(field(err, "causeModule"), "name"), 200) : null,
    lastNode: null,
    detailed: !failed || message !== null,
  };
}

interface ScenarioState {
  /** Epoch ms (Vigil's clock): the logs up to it were read by the last finished sweep. */
  at?: number;
  /** A sweep that ran out of budget: the `imtId` to continue after, and the sweep's upper bound. */
  last?: string;
  to?: number;
  /** Before 2026-11 (#18 review): the newest log's ms of an unfinished sweep; read as `to`. */
  top?: number;
  /** Requests for its logs that failed in a row, and until when it is set aside. */
  fails?: number;
  asideUntil?: number;
}

/** A failed run whose reason (`GET /scenarios/{id}/executions/{id}`) is still to be read. */
interface PendingDetail {
  id: string;
  scenarioId: string;
  /** The log's start (epoch ms), status, duration and type: enough to write the run again. */
  ts: number;
  status: number;
  duration: number | null;
  type: string | null;
  tries?: number;
}

export interface WorkflowBState {
  /** Scenario ids of the team, as last listed completely, and when. */
  ids?: string[];
  listedAt?: number;
  /** A listing under way: the next offset and the ids so far. */
  listing?: { offset: number; ids: string[] };
  /** Where the round of scenarios goes on. */
  next?: number;
  scenario?: Record<string, ScenarioState>;
  pending?: PendingDetail[];
  /** Execution ids whose reason came from their details, newest last. */
  detailed?: string[];
}

/**
 * One sync tick of a workflow_b connection: at most `budget.pages` requests in all, none after
 * `limits.deadline`. The scenario listing takes at most half of them and continues over ticks;
 * reasons still owed from earlier ticks are kept a quarter; the rest reads logs, scenario after
 * scenario, each from its own position.
 */
export async function syncWorkflowB(
  agent: Agent,
  t: WorkflowBTarget,
  prevState: SyncState,
  budget: SyncBudget,
  timeoutMs: number,
  limits: TickLimits,
): Promise<SyncOutcome> {
  const headers = { authorization: `Token ${t.apiToken}` };
  const get = (path: string, maxBytes?: number) =>
    probeHttp(agent, `${t.api}${path}`, { timeoutMs, headers, json: true, maxBytes });
  const nowMs = limits.now.getTime();
  const prev: WorkflowBState = prevState.b ?? {};
  const b: WorkflowBState = { ...prev, scenario: { ...(prev.scenario ?? {}) } };
  const scen = b.scenario as Record<string, ScenarioState>;
  const out: SyncOutcome = {
    runs: [],
    names: [],
    state: { ...prevState },
    requests: 0,
    stoppedBy: null,
    warnings: [],
  };
  const runs = new Map<string, PlatformRun>();
  const names = new Map<string, string>();
  const pending = new Map<string, PendingDetail>((prev.pending ?? []).map((p) => [p.id, { ...p }]));
  const detailedIds = new Set(prev.detailed ?? []);
  /** Ends the tick on a 429 or 5xx (Make asked for quiet) or when Make cannot be reached; false otherwise. */
  const stop = (r: Extract<HttpOutcome, { ok: false }>) => {
    if (r.status === 429 || (r.status !== undefined && r.status >= 500)) {
      out.stoppedBy = `HTTP ${r.status}`;
      if (r.retryAfterMs) out.retryAfterMs = r.retryAfterMs;
      return true;
    }
    if (r.status === undefined && UNREACHABLE.has(r.reason)) {
      out.stoppedBy = r.reason;
      return true;
    }
    return false;
  };
  /** Whether one more request may start, within `cap` requests of the tick. */
  const spend = (cap = budget.pages) => {
    if (!out.stoppedBy && Date.now() >= limits.deadline) out.stoppedBy = "deadline";
    return out.requests < cap && !out.stoppedBy;
  };

  // The team's scenarios (and their names): every few minutes, over as many ticks as it takes,
  // with at most half of each tick's requests so that logs are read meanwhile.
  if (b.listing || !b.ids || !b.listedAt || nowMs - b.listedAt >= SCENARIOS_TTL_MS) {
    const listing = b.listing ?? { offset: 0, ids: [] };
    const seen = new Set(listing.ids);
    const cap = Math.ceil(budget.pages / 2);
    let complete = false;
    while (spend(cap)) {
      out.requests++;
      const r = await get(
        `/scenarios?teamId=${encodeURIComponent(t.teamId)}&pg%5Boffset%5D=${listing.offset}&pg%5Blimit%5D=${SCENARIO_PAGE}`,
      );
      if (!r.ok) {
        stop(r);
        break;
      }
      const list = field(r.body, "scenarios");
      const page: unknown[] = Array.isArray(list) ? list : [];
      for (const s of page) {
        const id = asId(field(s, "id"));
        if (!id) continue;
        const name = text(field(s, "name"), 500);
        if (name) names.set(id, name);
        // Offsets shift when a scenario is added or removed between two pages: counted once.
        if (seen.has(id)) continue;
        seen.add(id);
        listing.ids.push(id);
      }
      listing.offset += SCENARIO_PAGE;
      if (page.length < SCENARIO_PAGE || listing.ids.length >= MAX_SCENARIOS) {
        complete = true;
        break;
      }
    }
    if (complete) {
      b.ids = listing.ids.slice(0, MAX_SCENARIOS);
      b.listedAt = nowMs;
      delete b.listing;
      const current = new Set(b.ids);
      for (const id of Object.keys(scen)) if (!current.has(id)) delete scen[id];
    } else b.listing = listing;
  }

  // Reasons owed from earlier ticks keep a share of the requests, however many logs there are.
  const owed = Math.min(pending.size, budget.details, Math.max(1, Math.floor(budget.pages / 4)));
  const logCap = budget.pages - owed;

  // Scenarios in turn, each from where it stopped. A first listing still under way already gives
  // scenarios to read.
  const ids = b.ids ?? b.listing?.ids ?? [];
  let visited = 0;
  let i = (b.next ?? 0) % Math.max(1, ids.length);
  while (ids.length && visited < ids.length && spend(logCap)) {
    const sid = ids[i] as string;
    const s = scen[sid] ?? {};
    if (s.asideUntil && s.asideUntil > nowMs) {
      visited++;
      i = (i + 1) % ids.length;
      continue;
    }
    // A saved position is never later than now: a far-future one would read nothing ever again.
    const at = s.at === undefined ? undefined : Math.min(s.at, nowMs);
    const floor = at !== undefined ? at - LOG_OVERLAP_MS : nowMs - FIRST_SYNC_MS - LOG_OVERLAP_MS;
    // An unfinished sweep keeps its upper bound: the logs above its `last` are not in it.
    const to = Math.min(s.to ?? (s.last ? (s.top ?? nowMs) : nowMs), nowMs);
    let last = s.last;
    let finished = false;
    let failed = false;
    let sent = false;
    while (spend(logCap)) {
      out.requests++;
      sent = true;
      const r = await get(
        `/scenarios/${encodeURIComponent(sid)}/logs?from=${Math.max(0, floor)}&to=${to}` +
          `&pg%5BsortDir%5D=desc&pg%5Blimit%5D=${LOG_PAGE}${last ? `&pg%5Blast%5D=${encodeURIComponent(last)}` : ""}`,
      );
      if (!r.ok) {
        if (stop(r)) break;
        if (r.status === 404)
          finished = true; // the scenario is gone: the next listing drops it
        else failed = true; // this scenario's trouble (a timeout, 400, 403): the others go on
        break;
      }
      const list = field(r.body, "scenarioLogs");
      const page: unknown[] = Array.isArray(list) ? list : [];
      for (const l of page) {
        if (!isRecord(l)) continue;
        const run = toRun(l, sid, limits.now);
        if (!run) continue;
        if (!run.detailed) {
          // Its reason came from the details already: the log without one must not replace it.
          if (detailedIds.has(run.id)) continue;
          if (!pending.has(run.id))
            pending.set(run.id, {
              id: run.id,
              scenarioId: sid,
              ts: run.ts.getTime(),
              status: Number(l.status),
              duration: run.durationMs,
              type: run.mode,
            });
        }
        runs.set(run.id, run);
      }
      const lastLog = page[page.length - 1];
      last = text(field(lastLog, "imtId"), 200) ?? undefined;
      if (page.length < LOG_PAGE || !last) {
        finished = true;
        break;
      }
    }
    if (finished) scen[sid] = { at: Math.max(to, at ?? 0) };
    else if (failed) {
      const fails = (s.fails ?? 0) + 1;
      const next: ScenarioState = { ...s, fails };
      delete next.asideUntil;
      if (fails >= SCENARIO_FAILURES) {
        const wait = Math.min(MAX_SET_ASIDE_MS, SET_ASIDE_MS * 2 ** (fails - SCENARIO_FAILURES));
        next.asideUntil = nowMs + wait;
        out.warnings.push(
          `scenario ${sid}: its logs failed ${fails} times in a row; set aside for ${Math.round(wait / 60_000)} min`,
        );
      }
      scen[sid] = next;
    } else {
      // The budget ran out inside this scenario: it goes on first next time, from `last`.
      if (sent) scen[sid] = { ...(at !== undefined ? { at } : {}), ...(last ? { last, to } : {}) };
      break;
    }
    visited++;
    i = (i + 1) % ids.length;
  }
  b.next = i;

  // Failure reasons the logs did not carry, oldest owed first, bounded.
  let reasons = 0;
  for (const p of [...pending.values()]) {
    if (reasons >= budget.details || !spend()) break;
    reasons++;
    out.requests++;
    const r = await get(
      `/scenarios/${encodeURIComponent(p.scenarioId)}/executions/${encodeURIComponent(p.id)}`,
      1024 * 1024,
    );
    if (!r.ok) {
      if (stop(r)) break;
      if (r.status === 404 || (p.tries ?? 0) + 1 >= DETAIL_TRIES) pending.delete(p.id);
      else p.tries = (p.tries ?? 0) + 1;
      continue;
    }
    const run = runs.get(p.id) ?? pendingRun(p, limits.now);
    if (run) {
      const e = field(r.body, "error");
      run.error = text(field(e, "message")) ?? text(field(e, "name")) ?? run.error;
      run.errorNode = text(field(field(e, "causeModule"), "name"), 200);
      run.detailed = true;
      runs.set(run.id, run);
      detailedIds.delete(p.id);
      detailedIds.add(p.id);
    }
    pending.delete(p.id);
  }

  const owedNow = [...pending.values()];
  if (owedNow.length > MAX_PENDING)
    out.warnings.push(
      `${owedNow.length - MAX_PENDING} failed runs keep Make's status as their reason (over ${MAX_PENDING} waiting)`,
    );
  b.pending = owedNow.slice(-MAX_PENDING);
  b.detailed = [...detailedIds].slice(-MAX_DETAILED);
  if (!b.pending.length) delete b.pending;
  if (!b.detailed.length) delete b.detailed;
  out.runs = [...runs.values()];
  out.names = [...names].map(([workflowId, name]) => ({ workflowId, name }));
  out.state.b = b;
  return out;
}

/** A run owed its reason, as its log showed it (read in an earlier tick). */
function pendingRun(p: PendingDetail, now: Date): PlatformRun | null {
  if (!Number.isFinite(p.ts)) return null; // a state written by hand, or by another version
  return toRun(
    {
      id: p.id,
      timestamp: new Date(p.ts).toISOString(),
      status: p.status,
      duration: p.duration,
      type: p.type,
    },
    p.scenarioId,
    now,
  );
}

export function workflowBApi(template: string, region: string | null): string {
  return template.replace("{region}", encodeURIComponent(region || "eu1")).replace(/\/+$/, "");
}
