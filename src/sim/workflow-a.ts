import { type SimServer, type SimState, startSimServer } from "./server.js";

/**
 * A self-hosted workflow automation instance (`workflow_a`), speaking the protocol in
 * ARCHITECTURE.md: GET /healthz; GET /api/v1/workflows?limit=1 and
 * GET /api/v1/executions?limit=&cursor= with header X-N8N-API-KEY.
 *
 * Control: POST /__sim/state {fault, latencyMs}; POST /__sim/executions {count, status,
 * workflowId} adds executions; PATCH /__sim/executions/{id} {status} changes one (e.g.
 * running -> success); GET /__sim/executions lists them.
 */
export type ExecStatus = "new" | "running" | "success" | "error" | "waiting" | "canceled" | "crashed";
export const EXEC_STATUSES: ExecStatus[] = [
  "new",
  "running",
  "success",
  "error",
  "waiting",
  "canceled",
  "crashed",
];

export interface SimExecution {
  id: string;
  workflowId: string;
  status: ExecStatus;
  mode: string;
  startedAt: string;
  stoppedAt: string | null;
}

export async function startWorkflowA(
  opts: { port?: number; apiKey?: string; latencyMs?: number; executions?: number } = {},
) {
  const state: SimState = { fault: "none", latencyMs: opts.latencyMs ?? 0 };
  const apiKey = opts.apiKey ?? "sim-api-key";
  const executions: SimExecution[] = []; // oldest first
  let nextId = 1;
  const add = (count: number, status: ExecStatus, workflowId: string) => {
    for (let i = 0; i < count; i++) {
      const started = new Date(Date.now() - (count - i) * 1000);
      const done = status !== "running" && status !== "waiting" && status !== "new";
      executions.push({
        id: String(nextId++),
        workflowId,
        status,
        mode: "trigger",
        startedAt: started.toISOString(),
        stoppedAt: done ? new Date(started.getTime() + 500).toISOString() : null,
      });
    }
  };
  if (opts.executions) add(opts.executions, "success", "wf-1");

  const sim: SimServer & { executions: SimExecution[]; add: typeof add } = Object.assign(
    await startSimServer({
      port: opts.port,
      state,
      platform: (req, url) => {
        if (url.pathname === "/healthz") return [200, { status: "ok" }];
        const authorized = req.headers["x-n8n-api-key"] === apiKey && state.fault !== "bad_credentials";
        if (url.pathname === "/api/v1/workflows") {
          if (!authorized) return [401, { message: "unauthorized" }];
          return [
            200,
            { data: [{ id: "wf-1", name: "Simulated workflow", active: true }], nextCursor: null },
          ];
        }
        if (url.pathname === "/api/v1/executions") {
          if (!authorized) return [401, { message: "unauthorized" }];
          const limit = Math.min(Number(url.searchParams.get("limit") ?? 100) || 100, 250);
          const newestFirst = [...executions].reverse();
          const cursor = url.searchParams.get("cursor");
          const start = cursor ? Number(Buffer.from(cursor, "base64url").toString()) : 0;
          const page = newestFirst.slice(start, start + limit);
          const next =
            start + limit < newestFirst.length
              ? Buffer.from(String(start + limit)).toString("base64url")
              : null;
          return [200, { data: page, nextCursor: next }];
        }
        return [404, { message: "not found" }];
      },
      control: (req, url, body) => {
        const b = (body ?? {}) as { count?: number; status?: ExecStatus; workflowId?: string };
        if (url.pathname === "/__sim/executions" && req.method === "GET") return [200, { data: executions }];
        if (url.pathname === "/__sim/executions" && req.method === "POST") {
          const status = b.status ?? "success";
          if (!EXEC_STATUSES.includes(status))
            return [400, { error: `status must be one of ${EXEC_STATUSES.join(", ")}` }];
          add(Math.max(1, Math.min(b.count ?? 1, 10_000)), status, b.workflowId ?? "wf-1");
          return [201, { total: executions.length }];
        }
        const m = /^\/__sim\/executions\/([^/]+)$/.exec(url.pathname);
        if (m && req.method === "PATCH") {
          const e = executions.find((x) => x.id === m[1]);
          if (!e) return [404, { error: "no such execution" }];
          if (!b.status || !EXEC_STATUSES.includes(b.status)) return [400, { error: "status is required" }];
          e.status = b.status;
          e.stoppedAt = b.status === "running" || b.status === "waiting" ? null : new Date().toISOString();
          return [200, e];
        }
        return [404, { error: "no such control route" }];
      },
    }),
    { executions, add },
  );
  return sim;
}
