import type { Agent } from "undici";
import type { AppContext } from "../core/context.js";
import type { CredentialBox } from "../lib/credentials.js";
import { traced } from "../lib/tracing.js";
import type { Claimed } from "./claim.js";
import { type CheckResult, runCheck } from "./platforms.js";
import { SYNC_DEADLINE_MS, type SyncState, syncExecutions } from "./sync.js";

/**
 * Decrypted platform credentials, per credential box, by their stored text: a probe process
 * decrypts each connection's key every check otherwise (AES-GCM, a few % of its CPU at 800
 * checks/s). A changed key is a new stored text; a cache at the bound starts over.
 */
const plainKeys = new WeakMap<CredentialBox, Map<string, string>>();
const PLAIN_KEYS_MAX = 100_000;

function decrypted(box: CredentialBox, stored: string | null): string | null {
  if (!stored) return null;
  let keys = plainKeys.get(box);
  if (!keys) plainKeys.set(box, (keys = new Map()));
  let plain = keys.get(stored);
  if (plain === undefined) {
    plain = box.decrypt(stored);
    if (keys.size >= PLAIN_KEYS_MAX) keys.clear();
    keys.set(stored, plain);
  }
  return plain;
}

/** Executions are pulled after a successful check, at most this often per connection. */
export const SYNC_EVERY_MS = 60_000;

/**
 * How long the check and the pull of one connection may send requests: half the probe lease,
 * at most SYNC_DEADLINE_MS. The last request may still take its timeout, so the result is
 * recorded while the lease holds (30 s: 15 s, plus 10 s at worst) and no other worker starts the
 * same connection meanwhile.
 */
export function syncWindowMs(leaseMs: number): number {
  return Math.min(SYNC_DEADLINE_MS, leaseMs / 2);
}

/**
 * The platform requests of one claimed connection's check: the availability check, then (at
 * most once a minute, after a success) the execution pull. Expected failures are values: an
 * unreachable platform is a failed CheckResult, a failed pull leaves `sync` null and is retried
 * at the next check; a pull that asked nothing (held off by the platform) leaves it null too, so
 * `last_sync_at` says when runs were last pulled.
 */
export const checkConnection = traced(
  "vigil.probe.check",
  {
    attributes: (_ctx, _agent, c) => ({
      "vigil.connection.id": c.id,
      "vigil.connection.kind": c.service_type,
    }),
    result: ({ result }) => ({ "vigil.check.outcome": result.available ? "up" : (result.reason ?? "down") }),
  },
  check,
);

async function check(
  ctx: AppContext,
  agent: Agent,
  c: Claimed,
  timeoutMs: number,
): Promise<{ result: CheckResult; sync: SyncState | null }> {
  const started = Date.now();
  let result: CheckResult;
  const apiKey = decrypted(ctx.credentials, c.api_key_enc);
  const apiToken = decrypted(ctx.credentials, c.api_token_enc);
  const state: SyncState = c.sync_state ?? {};
  const now = ctx.now().getTime();
  const syncDue = !c.last_sync_at || now - new Date(c.last_sync_at).getTime() >= SYNC_EVERY_MS;
  // A sync whose sweep starts at the newest run takes the check's authenticated request as its
  // first page (one request less); not while a Retry-After holds the sync off.
  const listPage =
    syncDue &&
    c.service_type === "workflow_a" &&
    !state.sweep?.cursor &&
    !(state.backoffUntil && Date.parse(state.backoffUntil) > now);
  let firstPage: unknown;
  try {
    const { page, ...checked } = await runCheck(
      agent,
      { serviceType: c.service_type, baseUrl: c.base_url, apiKey, apiToken, region: c.region },
      { timeoutMs, workflowBApiTemplate: ctx.config.workflowBApiTemplate, listPage },
    );
    result = checked;
    firstPage = page;
  } catch (err) {
    result = { available: false, responseTimeMs: null, reason: "network", error: (err as Error).message };
  }
  let sync: SyncState | null = null;
  // The worker's lease is PROBE_LEASE_SECONDS; the time the check took counts against the window.
  const left = syncWindowMs(ctx.config.probe.leaseSeconds * 1000) - (Date.now() - started);
  if (result.available && syncDue && left > 0) {
    try {
      const out = await syncExecutions(
        ctx,
        agent,
        {
          id: c.id,
          serviceType: c.service_type,
          baseUrl: c.base_url,
          apiKey,
          apiToken,
          region: c.region,
          teamId: c.team_id,
          state,
          lastSyncAt: c.last_sync_at ? new Date(c.last_sync_at) : null,
          ...(c.fresh_workflow_ids ? { freshWorkflowIds: new Set(c.fresh_workflow_ids) } : {}),
          ...(firstPage === undefined ? {} : { firstPage }),
        },
        timeoutMs,
        undefined,
        left,
      );
      if (out.synced) sync = out.state;
    } catch (err) {
      ctx.log.warn({ connection: c.id, err: (err as Error).message }, "execution sync failed; will retry");
    }
  }
  return { result, sync };
}
