import type { Agent } from "undici";
import { type HttpOutcome, probeHttp } from "./http.js";
import {
  asId,
  type PlatformRun,
  type SyncBudget,
  type SyncOutcome,
  type SyncState,
  text,
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
 * minute), visiting scenarios in turn; each scenario keeps its own position.
 */

export interface WorkflowBTarget {
  api: string;
  apiToken: string;
  teamId: string;
}

interface MakeLog {
  id?: unknown;
  imtId?: unknown;
  status?: unknown;
  timestamp?: unknown;
  duration?: unknown;
  type?: unknown;
  error?: { name?: unknown; message?: unknown; causeModule?: { name?: unknown } };
}

/** Make's log statuses on the spec's five. */
export const WORKFLOW_B_STATUSES: Record<number, { status: string; open: boolean; note: string }> = {
  0: { status: "running", open: true, note: "pending (Make's SDK); not listed by Make's documentation" },
  1: { status: "success", open: false, note: "" },
  2: { status: "success", open: false, note: "completed with warnings; `error` says which" },
  3: { status: "error", open: false, note: "" },
};

export function mapWorkflowBStatus(raw: unknown): { status: string; open: boolean } {
  const n = typeof raw === "number" ? raw : typeof raw === "string" && /^\d+$/.test(raw) ? Number(raw) : NaN;
  const known = WORKFLOW_B_STATUSES[n];
  if (known) return known;
  return { status: Number.isFinite(n) ? `status_${n}` : "unknown", open: false };
}

/** Logs re-read from this far before the newest synced one: a run's log may be written up to its end. */
export const LOG_OVERLAP_MS = 45 * 60_000;
/** A first sync reaches back this far. */
const FIRST_SYNC_MS = 24 * 3_600_000;
/** The scenario list is read again after this long (new scenarios, renames). */
const SCENARIOS_TTL_MS = 10 * 60_000;
const LOG_PAGE = 50;
const SCENARIO_PAGE = 100;
const MAX_SCENARIOS = 5000;

function toRun(l: MakeLog, scenarioId: string): PlatformRun | null {
  const id = asId(l.id);
  const ts = typeof l.timestamp === "string" ? new Date(l.timestamp) : null;
  if (!id || !ts || !Number.isFinite(ts.getTime())) return null;
  const { status, open } = mapWorkflowBStatus(l.status);
  const duration = typeof l.duration === "number" && Number.isFinite(l.duration) && !open ? l.duration : null;
  const message = text(l.error?.message) ?? text(l.error?.name);
  const failed = status === "error" || Number(l.status) === 2;
  return {
    id,
    ts,
    workflowId: scenarioId,
    status,
    open,
    mode: text(l.type, 32),
    stoppedAt: duration === null ? null : new Date(ts.getTime() + duration),
    durationMs: duration,
    error: failed
      ? (message ?? (status === "error" ? "scenario run ended with an error" : "completed with warnings"))
      : null,
    errorNode: failed ? text(l.error?.causeModule?.name, 200) : null,
    lastNode: null,
    detailed: !failed || message !== null,
  };
}

/** Milliseconds of an `imtId` (`<epoch-ms>_scenario…`), or of the log's timestamp. */
const imtMs = (l: MakeLog) => {
  const m = typeof l.imtId === "string" ? /^(\d{10,16})_/.exec(l.imtId) : null;
  if (m) return Number(m[1]);
  return typeof l.timestamp === "string" ? Date.parse(l.timestamp) : NaN;
};

interface ScenarioState {
  /** Epoch ms of the newest log of the last finished sweep. */
  at?: number;
  /** A sweep that ran out of budget: the `imtId` to continue after, and the sweep's newest. */
  last?: string;
  top?: number;
}

export interface WorkflowBState {
  /** Scenario ids of the team, as last listed, and when. */
  ids?: string[];
  listedAt?: number;
  /** Where the round of scenarios goes on. */
  next?: number;
  scenario?: Record<string, ScenarioState>;
}

export async function syncWorkflowB(
  agent: Agent,
  t: WorkflowBTarget,
  prevState: SyncState,
  budget: SyncBudget,
  timeoutMs: number,
  now: Date,
  lastSyncAt: Date | null,
): Promise<SyncOutcome> {
  const headers = { authorization: `Token ${t.apiToken}` };
  const get = (path: string, maxBytes?: number) =>
    probeHttp(agent, `${t.api}${path}`, { timeoutMs, headers, json: true, maxBytes });
  const prev: WorkflowBState = prevState.b ?? {};
  const b: WorkflowBState = { ...prev, scenario: { ...(prev.scenario ?? {}) } };
  const scen = b.scenario as Record<string, ScenarioState>;
  const out: SyncOutcome = { runs: [], names: [], state: { ...prevState }, requests: 0, stoppedBy: null };
  const stop = (r: Extract<HttpOutcome, { ok: false }>) => {
    if (r.status === 429 || (r.status !== undefined && r.status >= 500)) {
      out.stoppedBy = `HTTP ${r.status}`;
      if (r.retryAfterMs) out.retryAfterMs = r.retryAfterMs;
    }
  };
  const spend = () => out.requests < budget.pages && !out.stoppedBy;

  // The team's scenarios (and their names), read again every few minutes.
  if (!b.ids || !b.listedAt || now.getTime() - b.listedAt >= SCENARIOS_TTL_MS) {
    const ids: string[] = [];
    let complete = false;
    for (let offset = 0; spend() && ids.length < MAX_SCENARIOS; offset += SCENARIO_PAGE) {
      out.requests++;
      const r = await get(
        `/scenarios?teamId=${encodeURIComponent(t.teamId)}&pg%5Boffset%5D=${offset}&pg%5Blimit%5D=${SCENARIO_PAGE}`,
      );
      if (!r.ok) {
        stop(r);
        break;
      }
      const list = (r.body as { scenarios?: unknown }).scenarios;
      const page = Array.isArray(list) ? (list as { id?: unknown; name?: unknown }[]) : [];
      for (const s of page) {
        const id = asId(s.id);
        if (!id) continue;
        ids.push(id);
        const name = text(s.name, 500);
        if (name) out.names.push({ workflowId: id, name });
      }
      if (page.length < SCENARIO_PAGE) {
        complete = true;
        break;
      }
    }
    if (complete || ids.length > (b.ids?.length ?? 0)) {
      b.ids = ids;
      b.listedAt = now.getTime();
      for (const id of Object.keys(scen)) if (!ids.includes(id)) delete scen[id];
    }
  }

  // Scenarios in turn, each from where it stopped.
  const ids = b.ids ?? [];
  let visited = 0;
  let i = (b.next ?? 0) % Math.max(1, ids.length);
  const details: { run: PlatformRun; scenarioId: string }[] = [];
  while (ids.length && visited < ids.length && spend()) {
    const sid = ids[i] as string;
    const s = scen[sid] ?? {};
    const floor =
      s.at !== undefined
        ? s.at - LOG_OVERLAP_MS
        : (lastSyncAt?.getTime() ?? now.getTime() - FIRST_SYNC_MS) - LOG_OVERLAP_MS;
    let last = s.last;
    let top = s.top;
    let finished = false;
    while (spend()) {
      out.requests++;
      const r = await get(
        `/scenarios/${encodeURIComponent(sid)}/logs?from=${Math.max(0, floor)}&to=${now.getTime()}` +
          `&pg%5BsortDir%5D=desc&pg%5Blimit%5D=${LOG_PAGE}${last ? `&pg%5Blast%5D=${encodeURIComponent(last)}` : ""}`,
      );
      if (!r.ok) {
        stop(r);
        if (r.status === 404) finished = true; // the scenario is gone: the next listing drops it
        break;
      }
      const list = (r.body as { scenarioLogs?: unknown }).scenarioLogs;
      const page = Array.isArray(list) ? (list as MakeLog[]) : [];
      for (const l of page) {
        const ms = imtMs(l);
        if (Number.isFinite(ms)) top = Math.max(top ?? ms, ms);
        const run = toRun(l, sid);
        if (!run) continue;
        out.runs.push(run);
        if (!run.detailed) details.push({ run, scenarioId: sid });
      }
      const lastLog = page[page.length - 1];
      last = lastLog && typeof lastLog.imtId === "string" ? lastLog.imtId : undefined;
      if (page.length < LOG_PAGE || !last) {
        finished = true;
        break;
      }
    }
    if (finished)
      scen[sid] = {
        ...(top !== undefined ? { at: Math.max(top, s.at ?? 0) } : s.at !== undefined ? { at: s.at } : {}),
      };
    else {
      scen[sid] = { ...s, ...(last ? { last } : {}), ...(top !== undefined ? { top } : {}) };
      break; // the budget ran out inside this scenario: it goes on first next time
    }
    visited++;
    i = (i + 1) % ids.length;
  }
  b.next = i;

  // Failure reasons the log did not carry, bounded.
  for (const { run, scenarioId } of details.slice(0, budget.details)) {
    if (!spend()) break;
    out.requests++;
    const r = await get(
      `/scenarios/${encodeURIComponent(scenarioId)}/executions/${encodeURIComponent(run.id)}`,
      1024 * 1024,
    );
    if (!r.ok) {
      stop(r);
      continue;
    }
    const e = (r.body as { error?: MakeLog["error"] }).error;
    run.error = text(e?.message) ?? text(e?.name) ?? run.error;
    run.errorNode = text(e?.causeModule?.name, 200);
    run.detailed = true;
  }

  out.state.b = b;
  return out;
}

export function workflowBApi(template: string, region: string | null): string {
  return template.replace("{region}", encodeURIComponent(region || "eu1")).replace(/\/+$/, "");
}
