import { type SimState, startSimServer } from "./server.js";

/**
 * A hosted workflow automation account (`workflow_b`). Vigil reaches it at
 * `{api}` = a template like `https://{region}.make.com/api/v2`; the simulator answers under any
 * one-segment prefix, so tests use the template `http://127.0.0.1:PORT/{region}/api/v2`.
 *
 * GET {api}/users/me                      Authorization: Token <api_token>
 * GET {api}/scenarios?teamId=T            the team's scenarios
 * GET {api}/scenarios/{id}/logs?from=&to= run logs (ms epoch bounds); status 1 success, 2 warning, 3 error
 * Control: POST /__sim/logs {scenarioId, count, status} adds logs.
 */
export interface ScenarioLog {
  id: string;
  status: 1 | 2 | 3;
  timestamp: string;
  duration: number;
  operations: number;
}

export async function startWorkflowB(
  opts: { port?: number; apiToken?: string; teamId?: string; latencyMs?: number } = {},
) {
  const state: SimState = { fault: "none", latencyMs: opts.latencyMs ?? 0 };
  const apiToken = opts.apiToken ?? "sim-api-token";
  const teamId = opts.teamId ?? "1";
  const scenarios = [
    { id: 101, name: "Simulated scenario A", teamId: Number(teamId) },
    { id: 102, name: "Simulated scenario B", teamId: Number(teamId) },
  ];
  const logs = new Map<number, ScenarioLog[]>(scenarios.map((s) => [s.id, []]));
  let nextLog = 1;
  const add = (scenarioId: number, count: number, status: 1 | 2 | 3) => {
    const list = logs.get(scenarioId);
    if (!list) return false;
    for (let i = 0; i < count; i++) {
      list.push({
        id: `log-${nextLog++}`,
        status,
        timestamp: new Date(Date.now() - (count - i) * 1000).toISOString(),
        duration: 800,
        operations: 3,
      });
    }
    return true;
  };

  const sim = await startSimServer({
    port: opts.port,
    state,
    platform: (req, url) => {
      const m = /^(?:\/[^/]+)?\/api\/v2\/(.*)$/.exec(url.pathname);
      if (!m) return [404, { message: "not found" }];
      const path = m[1] ?? "";
      if (req.headers.authorization !== `Token ${apiToken}` || state.fault === "bad_credentials")
        return [401, { message: "Invalid access token." }];
      if (path === "users/me")
        return [200, { authUser: { id: 1, email: "sim@workflow-b.example", name: "Sim" } }];
      if (path === "scenarios") {
        if (url.searchParams.get("teamId") !== teamId) return [200, { scenarios: [] }];
        return [200, { scenarios }];
      }
      const l = /^scenarios\/(\d+)\/logs$/.exec(path);
      if (l) {
        const list = logs.get(Number(l[1]));
        if (!list) return [404, { message: "scenario not found" }];
        const from = Number(url.searchParams.get("from") ?? 0);
        const to = Number(url.searchParams.get("to") ?? Date.now() + 1);
        const inRange = list.filter((x) => Date.parse(x.timestamp) >= from && Date.parse(x.timestamp) <= to);
        return [200, { scenarioLogs: [...inRange].reverse() }];
      }
      return [404, { message: "not found" }];
    },
    control: (req, url, body) => {
      if (url.pathname === "/__sim/logs" && req.method === "POST") {
        const b = (body ?? {}) as { scenarioId?: number; count?: number; status?: number };
        const status = (b.status ?? 1) as 1 | 2 | 3;
        if (![1, 2, 3].includes(status)) return [400, { error: "status must be 1, 2 or 3" }];
        if (!add(b.scenarioId ?? 101, Math.max(1, Math.min(b.count ?? 1, 10_000)), status))
          return [404, { error: "no such scenario" }];
        return [201, { ok: true }];
      }
      return [404, { error: "no such control route" }];
    },
  });
  return Object.assign(sim, { add, scenarios });
}
