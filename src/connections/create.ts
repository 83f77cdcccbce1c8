import { randomUUID } from "node:crypto";
import type { AppContext } from "../core/context.js";
import { insertKey } from "../identity/keys.js";
import type { Actor, ApiKeyActor, UserActor } from "../core/actor.js";
import type { Plan } from "../identity/plans.js";
import { accountPlan } from "../identity/repository.js";
import { asManager, mayPlaceIn } from "../identity/visibility.js";
import { CHECK_INTERVAL_SECONDS } from "../identity/plans.js";
import { checkTarget, probePolicy } from "../lib/outbound.js";
import type { Queryable } from "../stores/relational/types.js";
import { invalid, placementDenied } from "./errors.js";
import { insertConnection } from "./repository.js";
import { type CreateConnectionBody, KIND_FIELDS } from "./schema.js";

const CREDENTIAL_FIELDS = ["base_url", "api_key", "api_token", "region"] as const;

/** Per-kind rules the schema alone cannot express: required fields on create. */
function checkRequiredFields(
  kind: CreateConnectionBody["service_type"],
  body: Record<string, unknown>,
): void {
  for (const f of KIND_FIELDS[kind].required)
    if (body[f] === undefined) throw invalid(f, `is required for ${kind} connections`);
}

/** Another kind's credential (an api_key on a workflow_b connection, …) is a 400, on create and update. */
export function checkAllowedFields(
  kind: CreateConnectionBody["service_type"],
  body: Record<string, unknown>,
): void {
  const rules = KIND_FIELDS[kind];
  for (const f of CREDENTIAL_FIELDS) {
    if (body[f] !== undefined && body[f] !== null && !rules.allowed.includes(f))
      throw invalid(f, `is not used by ${kind} connections`);
  }
}

/**
 * Probe settings a kind can use (checks for workflow_a/b, heartbeats for gateways), and an
 * interval no shorter than the plan's minimum.
 */
export async function checkMonitoringFields(
  db: Queryable,
  p: ApiKeyActor | UserActor,
  kind: CreateConnectionBody["service_type"],
  organizationId: string | null,
  body: Record<string, unknown>,
): Promise<void> {
  const probeFields = ["check_interval_seconds", "failure_threshold"];
  const beatFields = ["heartbeat_interval_seconds", "heartbeat_grace_seconds"];
  for (const f of kind === "gateway" ? probeFields : beatFields) {
    if (body[f] !== undefined && body[f] !== null)
      throw invalid(
        f,
        kind === "gateway"
          ? "gateways are not probed; use heartbeat_interval_seconds"
          : "is only for gateway connections",
      );
  }
  const interval = body.check_interval_seconds;
  if (typeof interval === "number") {
    const plan = await planOf(db, p.userId, organizationId);
    const min = CHECK_INTERVAL_SECONDS[plan].minimum;
    if (interval < min)
      throw invalid("check_interval_seconds", `must be at least ${min} on the ${plan} plan`);
  }
}

/**
 * PROBE_DENY_PRIVATE=true: a `base_url` that Vigil probes (workflow_a) whose host is, or now
 * resolves into, a non-public range is a 400 naming it. A name that does not resolve yet passes
 * here; every probe connection is checked again when it is made (src/lib/outbound.ts).
 */
export async function checkProbeTarget(
  ctx: AppContext,
  kind: CreateConnectionBody["service_type"],
  baseUrl: string | undefined,
): Promise<void> {
  if (!ctx.config.outbound.denyPrivate || kind !== "workflow_a" || !baseUrl) return;
  const refused = await checkTarget(baseUrl, probePolicy(true));
  if (refused) throw invalid("base_url", refused);
}

/** The plan that governs a connection: its organization's, or its owner's. */
export async function planOf(db: Queryable, userId: string, organizationId: string | null): Promise<Plan> {
  return (await accountPlan(db, { userId, organizationId })) ?? "free";
}

/** The organization a request names: `personal` and null mean none; omitted means the key's own. */
export function requestedOrganization(p: Actor, value: string | null | undefined): string | null {
  if (value === undefined)
    return p.type === "api_key" && p.scope === "organization" ? p.organizationId : null;
  return value === "personal" || value === null ? null : value;
}

export async function createConnection(ctx: AppContext, actor: Actor, body: CreateConnectionBody) {
  const p = asManager(actor);
  checkRequiredFields(body.service_type, body);
  checkAllowedFields(body.service_type, body);
  const db = ctx.stores.db;
  const organizationId = requestedOrganization(p, body.organization_id);
  const denied = await mayPlaceIn(db, p, organizationId);
  if (denied) throw placementDenied(denied);
  await checkMonitoringFields(db, p, body.service_type, organizationId, body);
  await checkProbeTarget(ctx, body.service_type, body.base_url);

  const id = randomUUID();
  return db.transaction(async (tx) => {
    await insertConnection(
      tx,
      {
        id,
        userId: p.userId,
        organizationId,
        serviceType: body.service_type,
        serviceName: body.service_name,
        baseUrl: body.base_url ?? null,
        apiKeyEnc: body.api_key ? ctx.credentials.encrypt(body.api_key) : null,
        apiKeyLength: body.api_key?.length ?? 0,
        apiTokenEnc: body.api_token ? ctx.credentials.encrypt(body.api_token) : null,
        apiTokenLength: body.api_token?.length ?? 0,
        region: body.region ?? null,
        teamId: body.team_id ?? null,
        configuration: body.configuration === undefined ? null : JSON.stringify(body.configuration),
        checkIntervalSeconds: body.check_interval_seconds ?? null,
        failureThreshold: body.failure_threshold ?? null,
        heartbeatIntervalSeconds: body.heartbeat_interval_seconds ?? null,
        heartbeatGraceSeconds: body.heartbeat_grace_seconds ?? null,
      },
      ctx.now(),
    );
    const ingestKey =
      body.service_type === "gateway"
        ? await insertKey(tx, {
            id: randomUUID(),
            userId: p.userId,
            kind: "usage_ingestion",
            connectionId: id,
            name: `ingest: ${body.service_name}`,
            permissions: [],
          })
        : null;
    return {
      message: "Connection created",
      connection: {
        id,
        service_type: body.service_type,
        service_name: body.service_name,
        status: "inactive",
      },
      ingest_api_key: ingestKey,
    };
  });
}
