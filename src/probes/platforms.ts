import type { Agent } from "undici";
import { type FailureReason, probeHttp } from "./http.js";

/** What one availability check found; stored as one availability sample. */
export interface CheckResult {
  available: boolean;
  responseTimeMs: number | null;
  statusCode?: number;
  reason?: FailureReason;
  error?: string;
}

export interface CheckTarget {
  serviceType: "workflow_a" | "workflow_b";
  baseUrl: string | null;
  apiKey: string | null;
  apiToken: string | null;
  region: string | null;
}

export interface CheckOptions {
  timeoutMs: number;
  /** `workflow_b` API address; `{region}` is replaced by the connection's region. */
  workflowBApiTemplate: string;
}

const fail = (r: { reason: FailureReason; error: string; status?: number; ms: number }): CheckResult => ({
  available: false,
  responseTimeMs: r.reason === "timeout" ? null : r.ms,
  ...(r.status === undefined ? {} : { statusCode: r.status }),
  reason: r.reason,
  error: r.error,
});

/** A 401/403 from the platform's API: the credential is wrong (not the platform down). */
function rejected(r: { status?: number }, credential: string, responseTimeMs: number): CheckResult | null {
  if (r.status !== 401 && r.status !== 403) return null;
  return {
    available: false,
    responseTimeMs,
    statusCode: r.status,
    reason: "bad_credentials",
    error: `the API rejected the ${credential} (HTTP ${r.status})`,
  };
}

const join = (base: string, path: string) => `${base.replace(/\/+$/, "")}${path}`;

export function workflowBApi(template: string, region: string | null): string {
  return template.replace("{region}", encodeURIComponent(region || "eu1")).replace(/\/+$/, "");
}

/**
 * workflow_a: GET {base_url}/healthz must answer 2xx; then GET /api/v1/workflows?limit=1 with the
 * API key, where 401/403 means bad credentials. workflow_b: GET {api}/users/me with the token.
 * The response time is that of the first request (the platform's health).
 */
export async function runCheck(agent: Agent, t: CheckTarget, opts: CheckOptions): Promise<CheckResult> {
  if (t.serviceType === "workflow_a") {
    if (!t.baseUrl || !t.apiKey)
      return {
        available: false,
        responseTimeMs: null,
        reason: "bad_credentials",
        error: "base_url and api_key are required",
      };
    const health = await probeHttp(agent, join(t.baseUrl, "/healthz"), { timeoutMs: opts.timeoutMs });
    if (!health.ok) return fail(health);
    const api = await probeHttp(agent, join(t.baseUrl, "/api/v1/workflows?limit=1"), {
      timeoutMs: opts.timeoutMs,
      headers: { "X-N8N-API-KEY": t.apiKey },
      json: true,
    });
    if (!api.ok) return rejected(api, "api_key", health.ms) ?? fail(api);
    return { available: true, responseTimeMs: health.ms, statusCode: health.status };
  }
  if (!t.apiToken)
    return {
      available: false,
      responseTimeMs: null,
      reason: "bad_credentials",
      error: "api_token is required",
    };
  const me = await probeHttp(agent, `${workflowBApi(opts.workflowBApiTemplate, t.region)}/users/me`, {
    timeoutMs: opts.timeoutMs,
    headers: { authorization: `Token ${t.apiToken}` },
    json: true,
  });
  if (!me.ok) return rejected(me, "api_token", me.ms) ?? fail(me);
  return { available: true, responseTimeMs: me.ms, statusCode: me.status };
}
