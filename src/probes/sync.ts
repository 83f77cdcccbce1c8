import type { Agent } from "undici";
import type { AppContext } from "../core/context.js";
import { executions, type RowOf } from "../stores/series/tables.js";
import { workflowBApi } from "./platforms.js";
import { probeHttp } from "./http.js";

type Execution = RowOf<typeof executions>;

export interface SyncTarget {
  id: string;
  serviceType: "workflow_a" | "workflow_b";
  baseUrl: string | null;
  apiKey: string | null;
  apiToken: string | null;
  region: string | null;
  teamId: string | null;
  state: SyncState;
  lastSyncAt: Date | null;
}

/** workflow_a: the newest id seen and the ids still running then. */
export interface SyncState {
  highWater?: string;
  open?: string[];
}

const MAX_PAGES = 20;

/** The platforms' statuses on the spec's five. */
export function mapWorkflowAStatus(s: string): Execution["status"] {
  switch (s) {
    case "success":
      return "success";
    case "error":
    case "crashed":
    case "failed":
      return "error";
    case "waiting":
      return "waiting";
    case "canceled":
    case "cancelled":
      return "cancelled";
    default:
      return "running"; // new, running, unknown
  }
}

/** workflow_b log status: 1 success, 2 warning (completed, with warnings), 3 error. */
export const mapWorkflowBStatus = (s: number): Execution["status"] => (s === 3 ? "error" : "success");

const asId = (v: unknown) => (typeof v === "number" || typeof v === "string" ? String(v) : null);
const numeric = (s: string) => /^\d{1,30}$/.test(s);

/**
 * Where a pull may stop: the oldest of the last high-water id and the runs still open then
 * (n8n ids are increasing integers). Non-numeric ids: the high-water id itself.
 */
function stopPoint(state: SyncState): { older(id: string): boolean; isMark(id: string): boolean } {
  const marks = [state.highWater, ...(state.open ?? [])].filter((x): x is string => Boolean(x));
  if (marks.length && marks.every(numeric)) {
    const oldest = marks.map((m) => BigInt(m)).reduce((a, b) => (b < a ? b : a));
    return { older: (id) => numeric(id) && BigInt(id) < oldest, isMark: () => false };
  }
  return { older: () => false, isMark: (id) => id === state.highWater };
}

/**
 * Pulls a connection's executions into the series store after a successful check. Rows are
 * keyed by (startedAt, connection, execution id), so pulling a run again replaces it: never a
 * duplicate, and a run that finished since (running -> success) is updated in place.
 * Returns the number of rows written and the new state.
 */
export async function syncExecutions(
  ctx: AppContext,
  agent: Agent,
  t: SyncTarget,
  timeoutMs: number,
): Promise<{ written: number; state: SyncState }> {
  const now = ctx.now();
  const rows: Execution[] = [];
  let state: SyncState = t.state;

  if (t.serviceType === "workflow_a" && t.baseUrl && t.apiKey) {
    // Newest first, back to the last high-water id or the oldest run that was still open.
    const stop = stopPoint(t.state);
    let cursor: string | null = null;
    let newest: string | undefined;
    const open: string[] = [];
    for (let page = 0; page < MAX_PAGES; page++) {
      const url = `${t.baseUrl.replace(/\/+$/, "")}/api/v1/executions?limit=250${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`;
      const res = await probeHttp(agent, url, {
        timeoutMs,
        headers: { "X-N8N-API-KEY": t.apiKey },
        json: true,
      });
      if (!res.ok) break;
      const body = res.body as { data?: unknown[]; nextCursor?: string | null };
      let reached = false;
      for (const raw of body.data ?? []) {
        const e = raw as {
          id?: unknown;
          workflowId?: unknown;
          status?: unknown;
          startedAt?: unknown;
          stoppedAt?: unknown;
          mode?: unknown;
        };
        const id = asId(e.id);
        const started = typeof e.startedAt === "string" ? new Date(e.startedAt) : null;
        if (!id || !started || !Number.isFinite(started.getTime())) continue;
        if (stop.older(id)) {
          reached = true;
          break;
        }
        newest ??= id;
        const stopped = typeof e.stoppedAt === "string" ? new Date(e.stoppedAt) : null;
        const status = mapWorkflowAStatus(String(e.status ?? "running"));
        if (status === "running" || status === "waiting") open.push(id);
        rows.push({
          ts: started,
          connection_id: t.id,
          execution_id: id,
          workflow_id: asId(e.workflowId),
          status,
          mode: typeof e.mode === "string" && e.mode ? e.mode : null,
          stopped_at: stopped && Number.isFinite(stopped.getTime()) ? stopped : null,
          duration_ms:
            stopped && Number.isFinite(stopped.getTime())
              ? Math.max(0, stopped.getTime() - started.getTime())
              : null,
          error: status === "error" ? `execution ended with status ${String(e.status)}` : null,
          updated_at: now,
        });
        if (stop.isMark(id)) {
          reached = true;
          break;
        }
      }
      cursor = typeof body.nextCursor === "string" && body.nextCursor ? body.nextCursor : null;
      if (reached || !cursor) break;
    }
    state = { highWater: newest ?? t.state.highWater, open: [...new Set(open)].slice(0, 1000) };
  }

  if (t.serviceType === "workflow_b" && t.apiToken && t.teamId) {
    const api = workflowBApi(ctx.config.workflowBApiTemplate, t.region);
    const headers = { authorization: `Token ${t.apiToken}` };
    // A little overlap with the previous window catches logs written late; the upsert absorbs repeats.
    const from = (t.lastSyncAt ? t.lastSyncAt.getTime() : now.getTime() - 86_400_000) - 5 * 60_000;
    const scen = await probeHttp(agent, `${api}/scenarios?teamId=${encodeURIComponent(t.teamId)}`, {
      timeoutMs,
      headers,
      json: true,
    });
    if (scen.ok) {
      for (const s of ((scen.body as { scenarios?: { id?: unknown }[] }).scenarios ?? []).slice(0, 500)) {
        const scenarioId = asId(s.id);
        if (!scenarioId) continue;
        const logs = await probeHttp(
          agent,
          `${api}/scenarios/${encodeURIComponent(scenarioId)}/logs?from=${from}&to=${now.getTime()}`,
          {
            timeoutMs,
            headers,
            json: true,
          },
        );
        if (!logs.ok) continue;
        for (const raw of (logs.body as { scenarioLogs?: unknown[] }).scenarioLogs ?? []) {
          const l = raw as { id?: unknown; status?: unknown; timestamp?: unknown; duration?: unknown };
          const id = asId(l.id);
          const ts = typeof l.timestamp === "string" ? new Date(l.timestamp) : null;
          if (!id || !ts || !Number.isFinite(ts.getTime())) continue;
          const duration = typeof l.duration === "number" && Number.isFinite(l.duration) ? l.duration : null;
          const status = mapWorkflowBStatus(Number(l.status));
          rows.push({
            ts,
            connection_id: t.id,
            execution_id: id,
            workflow_id: scenarioId,
            status,
            mode: null,
            stopped_at: duration === null ? null : new Date(ts.getTime() + duration),
            duration_ms: duration,
            error:
              Number(l.status) === 3
                ? "scenario run ended with an error"
                : Number(l.status) === 2
                  ? "completed with warnings"
                  : null,
            updated_at: now,
          });
        }
      }
    }
  }

  if (rows.length) await ctx.stores.series.append(executions, rows);
  return { written: rows.length, state };
}
