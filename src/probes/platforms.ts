import type { Agent } from "undici";
import { probeHttp } from "./http.js";
import type { CheckResult } from "./platform.js";
import { workflowBApi } from "./workflow-b.js";
import { checkWorkflowA, failure } from "./workflow-a.js";

export type { CheckResult } from "./platform.js";

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
  /**
   * workflow_a: a sync follows whose sweep starts at the newest run, so the authenticated request
   * is the run list's first page, returned as `page` for the sync (see checkWorkflowA).
   */
  listPage?: boolean;
}

/**
 * The origin a connection's checks and syncs talk to (workflow_b: its region's API host, shared
 * by every connection of the region); the address as given when it is no URL.
 */
export function platformOrigin(
  t: Pick<CheckTarget, "serviceType" | "baseUrl" | "region">,
  workflowBApiTemplate: string,
): string {
  const url =
    t.serviceType === "workflow_a" ? (t.baseUrl ?? "") : workflowBApi(workflowBApiTemplate, t.region);
  try {
    return new URL(url).origin;
  } catch {
    return url;
  }
}

/** Make's answer to `/users/me` is one small object; more than this is not Make. */
const ME_MAX_BYTES = 256 * 1024;

/**
 * One availability check. workflow_a: see checkWorkflowA (readiness, then a small authenticated
 * request). workflow_b: `GET {api}/users/me` with the token; 401/403 means a bad token, a 429
 * proves the platform up (it answered; only the sync waits).
 */
export async function runCheck(
  agent: Agent,
  t: CheckTarget,
  opts: CheckOptions,
): Promise<CheckResult & { page?: unknown }> {
  if (t.serviceType === "workflow_a") {
    if (!t.baseUrl || !t.apiKey)
      return {
        available: false,
        responseTimeMs: null,
        reason: "bad_credentials",
        error: "base_url and api_key are required",
      };
    return checkWorkflowA(agent, { baseUrl: t.baseUrl, apiKey: t.apiKey }, opts.timeoutMs, opts.listPage);
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
    maxBytes: ME_MAX_BYTES,
  });
  if (me.ok) return { available: true, responseTimeMs: me.ms, statusCode: me.status };
  if (me.status === 401 || me.status === 403)
    return {
      available: false,
      responseTimeMs: me.ms,
      statusCode: me.status,
      reason: "bad_credentials",
      error: `the API rejected the api_token (HTTP ${me.status})`,
    };
  if (me.status === 429) return { available: true, responseTimeMs: me.ms, statusCode: 429 };
  return failure(me);
}
