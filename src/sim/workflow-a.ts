import { type SimServer, type SimState, startSimServer } from "./server.js";

/**
 * A self-hosted n8n instance (`workflow_a`), reproducing its public API as observed on a real
 * n8n 1.123 (ARCHITECTURE.md, "Platform protocols"; docs/operations.md, "Platforms as they really behave"):
 *
 * - `GET /healthz` `{"status":"ok"}`; `GET /healthz/readiness` 200 once the API is mounted, 503
 *   before (control `ready: false` holds a "just restarted" instance there).
 * - `GET /api/v1/executions?limit=&cursor=&status=&workflowId=&includeData=`, newest id first.
 *   Runs the process still holds are left out: `new`/`running` ones appear only with
 *   `status=running`, `waiting` ones not even with `status=waiting`. Ids are strings of
 *   increasing integers. `limit` defaults to 100 and must be 1..250; the cursor is standard base64
 *   of `{"lastId","limit"}` and its limit wins over the query's; a bad one is 400.
 * - `GET /api/v1/executions/{id}` any run, open or not; 404 `{"message":"Not Found"}` otherwise.
 *   `includeData=true` adds `data.resultData` (`error.message`, `error.node.name`,
 *   `lastNodeExecuted`) and `workflowData`.
 * - A waiting run that resumes gets a new `startedAt` (same id). A queued run (`new`) has
 *   `startedAt: null` until it starts (n8n's ExecutionEntity: the column is nullable); the by-id
 *   answer's `createdAt` is its only time.
 * - `GET /api/v1/workflows` and `/api/v1/workflows/{id}` return whole workflow bodies (nodes,
 *   connections, settings, static and pinned data): control `workflowBytes` makes one huge.
 * - Without the key `401 {"message":"'X-N8N-API-KEY' header required"}`; with a wrong one
 *   `401 {"message":"unauthorized"}`. Unknown query parameters are 400.
 * - `limit` 0 or negative lists every run; `status=error` includes crashed runs.
 *
 * Control: POST /__sim/state {fault, latencyMs}; POST /__sim/platform {ready, workflowBytes};
 * PUT /__sim/workflows/{id} {name}; POST /__sim/executions
 * {count, status, workflowId, error, node} adds runs; PATCH /__sim/executions/{id} {status}
 * changes one (waiting -> running rewrites startedAt, as n8n's resume does; new -> anything
 * else sets it); DELETE
 * /__sim/executions/{id} prunes one; GET /__sim/executions lists all, hidden ones too.
 */
export type ExecStatus =
  "new" | "running" | "success" | "error" | "waiting" | "canceled" | "crashed" | "unknown";
export const EXEC_STATUSES: ExecStatus[] = [
  "new",
  "running",
  "success",
  "error",
  "waiting",
  "canceled",
  "crashed",
  "unknown",
];
const OPEN: ExecStatus[] = ["new", "running", "waiting"];

export interface SimExecution {
  id: string;
  workflowId: string;
  status: ExecStatus;
  finished: boolean;
  mode: string;
  retryOf: string | null;
  retrySuccessId: string | null;
  startedAt: string | null;
  stoppedAt: string | null;
  waitTill: string | null;
  createdAt: string;
  /** Kept by the simulator for `includeData=true`. */
  failure?: { message: string; node: string };
  lastNode?: string;
}

export interface SimWorkflow {
  id: string;
  name: string;
  active: boolean;
}

const MAX_LIMIT = 250;

/** A run as the list shows it (fields in n8n's order). */
const publicView = (e: SimExecution) => ({
  id: e.id,
  finished: e.finished,
  mode: e.mode,
  retryOf: e.retryOf,
  retrySuccessId: e.retrySuccessId,
  status: e.status,
  startedAt: e.startedAt,
  stoppedAt: e.stoppedAt,
  workflowId: e.workflowId,
  waitTill: e.waitTill,
});

/** One run by id carries two more fields than the list: createdAt (stable across a resume) and deletedAt. */
const singleView = (e: SimExecution) => ({
  id: e.id,
  finished: e.finished,
  mode: e.mode,
  retryOf: e.retryOf,
  retrySuccessId: e.retrySuccessId,
  status: e.status,
  createdAt: e.createdAt,
  startedAt: e.startedAt,
  stoppedAt: e.stoppedAt,
  deletedAt: null,
  workflowId: e.workflowId,
  waitTill: e.waitTill,
});

function withData(e: SimExecution, wf: SimWorkflow | undefined, single = false) {
  const nodes = ["Webhook", ...(e.lastNode && e.lastNode !== "Webhook" ? [e.lastNode] : [])];
  return {
    ...(single ? singleView(e) : publicView(e)),
    data: {
      version: 1,
      startData: {},
      resultData: {
        runData: Object.fromEntries(
          nodes.map((n) => [n, [{ startTime: Date.parse(e.startedAt ?? e.createdAt), executionTime: 5 }]]),
        ),
        ...(e.lastNode ? { lastNodeExecuted: e.lastNode } : {}),
        ...(e.failure
          ? {
              error: {
                message: e.failure.message,
                name: "NodeOperationError",
                node: { name: e.failure.node, type: "n8n-nodes-base.code" },
                stack: `NodeOperationError: ${e.failure.message}\n    at Code.execute`,
              },
            }
          : {}),
      },
      executionData: {},
    },
    workflowData: wf
      ? { id: wf.id, name: wf.name, active: wf.active, nodes: [], connections: {} }
      : undefined,
  };
}

export async function startWorkflowA(
  opts: { port?: number; apiKey?: string; latencyMs?: number; executions?: number } = {},
) {
  const state: SimState & { ready: boolean; workflowBytes: number } = {
    fault: "none",
    latencyMs: opts.latencyMs ?? 0,
    ready: true,
    workflowBytes: 2000,
  };
  const apiKey = opts.apiKey ?? "sim-api-key";
  const executions: SimExecution[] = []; // oldest first
  const workflows = new Map<string, SimWorkflow>();
  const workflow = (id: string) => {
    let wf = workflows.get(id);
    if (!wf) {
      wf = { id, name: `Simulated workflow ${id}`, active: true };
      workflows.set(id, wf);
    }
    return wf;
  };
  workflow("wf-1");
  let nextId = 1;
  const add = (
    count: number,
    status: ExecStatus,
    workflowId: string,
    failure?: { message?: string; node?: string },
  ) => {
    workflow(workflowId);
    for (let i = 0; i < count; i++) {
      const started = new Date(Date.now() - (count - i) * 1000);
      const done = !OPEN.includes(status);
      const failed = status === "error" || status === "crashed";
      executions.push({
        id: String(nextId++),
        workflowId,
        status,
        finished: status === "success",
        mode: "webhook",
        retryOf: null,
        retrySuccessId: null,
        createdAt: started.toISOString(),
        startedAt: status === "new" ? null : started.toISOString(),
        // n8n sets stoppedAt when a run goes waiting, and waitTill to when it resumes by itself.
        stoppedAt: done || status === "waiting" ? new Date(started.getTime() + 500).toISOString() : null,
        waitTill: status === "waiting" ? new Date(started.getTime() + 3_600_000).toISOString() : null,
        ...(failed
          ? { failure: { message: failure?.message ?? "Simulated failure", node: failure?.node ?? "Code" } }
          : {}),
        lastNode: failed ? (failure?.node ?? "Code") : done ? "Respond" : "Wait",
      });
    }
  };
  if (opts.executions) add(opts.executions, "success", "wf-1");

  const unauthorized = (req: { headers: Record<string, unknown> }) =>
    req.headers["x-n8n-api-key"] !== apiKey || state.fault === "bad_credentials";

  const sim: SimServer & {
    executions: SimExecution[];
    workflows: Map<string, SimWorkflow>;
    add: typeof add;
  } = Object.assign(
    await startSimServer({
      port: opts.port,
      state,
      platform: (req, url) => {
        const p = url.pathname;
        if (p === "/healthz") return [200, { status: "ok" }];
        if (p === "/healthz/readiness")
          return state.ready ? [200, { status: "ok" }] : [503, { status: "error" }];
        if (!p.startsWith("/api/v1/")) return [404, { message: "not found" }];
        // Before readiness n8n has not mounted its API routes yet.
        if (!state.ready)
          return [404, { code: 404, message: `The requested webhook "${p}" is not registered.` }];
        if (!req.headers["x-n8n-api-key"]) return [401, { message: "'X-N8N-API-KEY' header required" }];
        if (unauthorized(req)) return [401, { message: "unauthorized" }];

        if (p === "/api/v1/workflows") {
          const data = [...workflows.values()].map((wf) => fullWorkflow(wf, state.workflowBytes));
          return [
            200,
            { data: data.slice(0, Number(url.searchParams.get("limit") ?? 100)), nextCursor: null },
          ];
        }
        const wm = /^\/api\/v1\/workflows\/([^/]+)$/.exec(p);
        if (wm) {
          const wf = workflows.get(decodeURIComponent(wm[1] as string));
          return wf ? [200, fullWorkflow(wf, state.workflowBytes)] : [404, { message: "Not Found" }];
        }

        if (p === "/api/v1/executions") {
          // As observed: a non-number is refused, a fraction fails in the database, and 0 or a
          // negative limit means no limit at all (TypeORM's take: 0).
          for (const key of url.searchParams.keys())
            if (!["limit", "cursor", "status", "workflowId", "projectId", "includeData"].includes(key))
              return [400, { message: `Unknown query parameter '${key}'` }];
          const includeData = url.searchParams.get("includeData");
          if (includeData !== null && includeData !== "true" && includeData !== "false")
            return [400, { message: "request/query/includeData must be boolean" }];
          let limit = 100;
          const rawLimit = url.searchParams.get("limit");
          if (rawLimit !== null && rawLimit !== "") {
            if (!Number.isFinite(Number(rawLimit)))
              return [400, { message: "request/query/limit must be number" }];
            const n = Number(rawLimit);
            if (n > MAX_LIMIT) return [400, { message: `request/query/limit must be <= ${MAX_LIMIT}` }];
            if (!Number.isInteger(n)) return [400, { message: "SQLITE_MISMATCH: datatype mismatch" }];
            limit = n >= 1 ? n : Number.MAX_SAFE_INTEGER;
          }
          let lastId: number | null = null;
          const cursor = url.searchParams.get("cursor");
          if (cursor) {
            const decoded = decodeCursor(cursor);
            if (decoded === "invalid") return [400, { message: "An invalid cursor was provided" }];
            if (decoded === "nan") return [400, { message: "SQLITE_ERROR: no such column: NaN" }];
            lastId = decoded.lastId;
            if (decoded.limit !== null) limit = decoded.limit; // the cursor's limit wins, past 250 too
          }
          const status = url.searchParams.get("status");
          const statuses = ["canceled", "error", "running", "success", "waiting"];
          if (status !== null && !statuses.includes(status))
            return [
              400,
              {
                message: `request/query/status must be equal to one of the allowed values: ${statuses.join(", ")}`,
              },
            ];
          const workflowId = url.searchParams.get("workflowId");
          const listed = [...executions].reverse().filter((e) => {
            if (workflowId && e.workflowId !== workflowId) return false;
            if (status === "running") return e.status === "running" || e.status === "new";
            if (e.status === "waiting" || e.status === "running" || e.status === "new") return false;
            if (status === "error") return e.status === "error" || e.status === "crashed"; // as n8n
            if (status) return e.status === status;
            return true;
          });
          const after = lastId === null ? listed : listed.filter((e) => Number(e.id) < (lastId as number));
          const page = after.slice(0, limit);
          const more = after.length > limit;
          const last = page[page.length - 1];
          const withRunData = url.searchParams.get("includeData") === "true";
          return [
            200,
            {
              data: page.map((e) => (withRunData ? withData(e, workflows.get(e.workflowId)) : publicView(e))),
              nextCursor:
                more && last
                  ? Buffer.from(JSON.stringify({ lastId: Number(last.id), limit })).toString("base64")
                  : null,
            },
          ];
        }
        const em = /^\/api\/v1\/executions\/([^/]+)$/.exec(p);
        if (em) {
          const wanted = decodeURIComponent(em[1] as string);
          if (!Number.isFinite(Number(wanted))) return [400, { message: "request/params/id must be number" }];
          const e = executions.find((x) => x.id === String(Number(wanted)));
          if (!e) return [404, { message: "Not Found" }];
          return [
            200,
            url.searchParams.get("includeData") === "true"
              ? withData(e, workflows.get(e.workflowId), true)
              : singleView(e),
          ];
        }
        return [404, { message: "not found" }];
      },
      control: (req, url, body) => {
        const b = (body ?? {}) as {
          count?: number;
          status?: ExecStatus;
          workflowId?: string;
          error?: string;
          node?: string;
          name?: string;
        };
        if (url.pathname === "/__sim/platform" && req.method === "POST") {
          const c = (body ?? {}) as { ready?: unknown; workflowBytes?: unknown };
          if (c.ready !== undefined) {
            if (typeof c.ready !== "boolean") return [400, { error: "ready must be true or false" }];
            state.ready = c.ready;
          }
          if (c.workflowBytes !== undefined) {
            if (
              typeof c.workflowBytes !== "number" ||
              c.workflowBytes < 0 ||
              c.workflowBytes > 64 * 1024 * 1024
            )
              return [400, { error: "workflowBytes must be a number from 0 to 67108864" }];
            state.workflowBytes = c.workflowBytes;
          }
          return [200, { ready: state.ready, workflowBytes: state.workflowBytes }];
        }
        if (url.pathname === "/__sim/executions" && req.method === "GET") return [200, { data: executions }];
        if (url.pathname === "/__sim/executions" && req.method === "POST") {
          const status = b.status ?? "success";
          if (!EXEC_STATUSES.includes(status))
            return [400, { error: `status must be one of ${EXEC_STATUSES.join(", ")}` }];
          add(Math.max(1, Math.min(b.count ?? 1, 10_000)), status, b.workflowId ?? "wf-1", {
            message: b.error,
            node: b.node,
          });
          return [201, { total: executions.length, lastId: String(nextId - 1) }];
        }
        const wf = /^\/__sim\/workflows\/([^/]+)$/.exec(url.pathname);
        if (wf && req.method === "PUT") {
          const w = workflow(decodeURIComponent(wf[1] as string));
          if (b.name) w.name = b.name;
          return [200, w];
        }
        const m = /^\/__sim\/executions\/([^/]+)$/.exec(url.pathname);
        const e = m ? executions.find((x) => x.id === m[1]) : undefined;
        if (m && req.method === "DELETE") {
          if (!e) return [404, { error: "no such execution" }];
          executions.splice(executions.indexOf(e), 1);
          return [200, { deleted: e.id }];
        }
        if (m && req.method === "PATCH") {
          if (!e) return [404, { error: "no such execution" }];
          if (!b.status || !EXEC_STATUSES.includes(b.status)) return [400, { error: "status is required" }];
          const resumed = e.status === "waiting" && b.status !== "waiting";
          if (resumed) e.startedAt = new Date().toISOString(); // n8n rewrites startedAt on resume
          if (b.status === "new")
            e.startedAt = null; // queued again: no start yet
          else if (e.startedAt === null) e.startedAt = new Date().toISOString(); // it starts
          e.status = b.status;
          e.finished = b.status === "success";
          e.waitTill = b.status === "waiting" ? new Date(Date.now() + 3_600_000).toISOString() : null;
          e.stoppedAt = OPEN.includes(b.status) && b.status !== "waiting" ? null : new Date().toISOString();
          if (b.status === "error" || b.status === "crashed") {
            e.failure = { message: b.error ?? "Simulated failure", node: b.node ?? "Code" };
            e.lastNode = e.failure.node;
          } else if (!OPEN.includes(b.status)) e.lastNode = "Respond";
          return [200, e];
        }
        return [404, { error: "no such control route" }];
      },
    }),
    { executions, workflows, add },
  );
  return sim;
}

/**
 * n8n's cursor: standard base64 of `{"lastId":"<id>","limit":<n>}`. What is not base64 JSON is
 * refused; `{}` starts at the top; a lastId that is not a number fails in n8n's database (SQLite).
 */
function decodeCursor(cursor: string): { lastId: number | null; limit: number | null } | "invalid" | "nan" {
  let v: { lastId?: unknown; limit?: unknown };
  try {
    v = JSON.parse(Buffer.from(cursor, "base64").toString("utf8")) as typeof v;
    if (typeof v !== "object" || v === null) return "invalid";
  } catch {
    return "invalid";
  }
  const lastId = v.lastId === undefined ? null : Number(v.lastId);
  if (lastId !== null && !Number.isFinite(lastId)) return "nan";
  const limit = typeof v.limit === "number" && v.limit >= 1 ? Math.floor(v.limit) : null;
  return { lastId, limit };
}

/** A workflow as n8n returns it: the whole body, code and all. */
function fullWorkflow(wf: SimWorkflow, bytes: number) {
  return {
    id: wf.id,
    name: wf.name,
    active: wf.active,
    isArchived: false,
    createdAt: "2026-01-01T00:00:00.000Z",
    updatedAt: "2026-01-01T00:00:00.000Z",
    nodes: [
      {
        id: "code-1",
        name: "Code",
        type: "n8n-nodes-base.code",
        typeVersion: 2,
        position: [0, 0],
        parameters: { jsCode: `// ${"x".repeat(Math.max(0, bytes))}\nreturn items;` },
      },
    ],
    connections: {},
    settings: { executionOrder: "v1" },
    staticData: null,
    meta: null,
    pinData: {},
    versionId: "00000000-0000-0000-0000-000000000000",
    triggerCount: 1,
    shared: [],
    tags: [],
  };
}
