import { randomUUID } from "node:crypto";
import { LATEST_PROTOCOL_VERSION } from "@modelcontextprotocol/sdk/types.js";
import { PERMISSIONS, type Permission, type Role } from "../../src/core/actor.js";
import { insertAnomaly } from "../../src/anomalies/repository.js";
import { openIncident } from "../../src/incidents/incidents.js";
import { insertOpenIncident } from "../../src/incidents/repository.js";
import { operatorTokens, revokeToken } from "../../src/oauth/service.js";
import {
  availabilitySamples,
  executions,
  gatewayHeartbeats,
  gatewayModelUsage,
  usageEntries,
} from "../../src/stores/series/tables.js";
import { deleteWebhookRow } from "../../src/webhooks/repository.js";
import type { TestApp } from "./app.js";
import { mcpTokenFor } from "./oauth.js";
import type { RouteWorld } from "./route-samples.js";
import { call, seedTenants, type Tenants } from "./tenants.js";

/**
 * The tenant matrix (issue #16 point 6): a world of three tenants with connections of every kind
 * and data in every store, the seven kinds of REST caller and the MCP users, the written-down
 * policy that says what each caller may do to each tenant, and the scanner that looks for other
 * tenants' data in every answer. test/api/tenant-matrix.test.ts walks the route table and the
 * tool list with it.
 *
 * Scopes are the accounts data can belong to: the three tenants of the matrix (carol's personal
 * account, organization A of alice (owner) and dave (member), organization B of bob (owner)), and
 * the personal accounts of alice, bob and dave, which hold data too (seedTenants gives alice and
 * bob a personal connection each) and must not leak either.
 */

export const TENANTS = ["carol", "orgA", "orgB"] as const;
export type Tenant = (typeof TENANTS)[number];
export type Scope = Tenant | "aliceP" | "bobP" | "daveP";
export type Org = "orgA" | "orgB";
export type UserName = "alice" | "bob" | "dave" | "carol";

export const KINDS = ["workflow_a", "workflow_b", "gateway"] as const;
export type Kind = (typeof KINDS)[number];
export const SHORT: Record<Kind, string> = { workflow_a: "wfa", workflow_b: "wfb", gateway: "gw" };

/** Every string written for a scope carries its marker, so any answer can be searched for it. */
export const marker = (s: Scope) => `T_${s}_`;

// --------------------------------------------------------------------------------------------
// The policy: who belongs where, and what each kind of caller may see and do.
// --------------------------------------------------------------------------------------------

/** Memberships (seedTenants): alice owns A, bob owns B, dave is a plain member of A, carol has none. */
export const ROLES: Record<UserName, Partial<Record<Org, Role>>> = {
  alice: { orgA: "owner" },
  bob: { orgB: "owner" },
  dave: { orgA: "member" },
  carol: {},
};
export const PERSONAL: Record<UserName, Scope> = {
  alice: "aliceP",
  bob: "bobP",
  dave: "daveP",
  carol: "carol",
};
const isOrg = (s: Scope | "personal"): s is Org => s === "orgA" || s === "orgB";
export const roleIn = (user: UserName, s: Scope): Role | null => (isOrg(s) ? (ROLES[user][s] ?? null) : null);
const manages = (role: Role | null) => role === "admin" || role === "owner";

export type CallerKind = "personal" | "organization" | "ingestion" | "revoked";

/** A REST caller: one API key. */
export interface Caller {
  /** Short column name. */
  name: string;
  /** What kind of caller it is, as issue #16 lists them. */
  label: string;
  key: string;
  kind: CallerKind;
  user: UserName;
  /** An organization key's organization. */
  org: Org | null;
  permissions: ReadonlySet<Permission>;
  /** An ingestion key's gateway connection. */
  connection: string | null;
}

/** An MCP caller: a signed-in user (an OAuth access token), or a token that no longer works. */
export interface McpCaller {
  name: string;
  label: string;
  token: string;
  user: UserName;
  kind: "user" | "revoked" | "expired";
}

/**
 * Which scopes' connections a caller sees: the one rule of SPEC "Authentication" 2 and "What the
 * service does" 9 (code: visibleConnectionsCondition in src/identity/repository.ts).
 *  - personal key, and a signed-in user (MCP, SPEC "Tool server"): the user's personal account
 *    plus every organization the user has any role in;
 *  - organization key: that organization only (not the personal account of its user);
 *  - ingestion key: its one gateway connection, and only through the heartbeat endpoint;
 *  - revoked key or token: nothing (401).
 */
export function visibleScopes(c: Caller | McpCaller): Scope[] {
  if (c.kind === "revoked" || c.kind === "expired" || c.kind === "ingestion") return [];
  if (c.kind === "organization") return c.org ? [c.org] : [];
  return [PERSONAL[c.user], ...(Object.keys(ROLES[c.user]) as Org[])];
}
export const sees = (c: Caller | McpCaller, s: Scope) => visibleScopes(c).includes(s);

/** The account a key acts for (budgets, webhooks): a personal key's user, an organization key's organization. */
export const accountOf = (c: Caller): Scope =>
  c.kind === "organization" && c.org ? c.org : PERSONAL[c.user];

/** What a REST target is: nothing (a list, once per caller), a connection, a placement, a webhook. */
export type Target =
  | { type: "none" }
  | { type: "connection"; tenant: Tenant; kind: Kind; id: string }
  | { type: "placement"; org: "omitted" | "personal" | Org }
  | { type: "filter"; org: "personal" | Org }
  | { type: "webhook"; account: Tenant | "own" };

export const targetName = (t: Target): string =>
  t.type === "none"
    ? "-"
    : t.type === "connection"
      ? `${t.tenant}/${SHORT[t.kind]}`
      : t.type === "placement"
        ? `→${t.org}`
        : t.type === "filter"
          ? t.org
          : t.account;

/** An expected outcome and the policy line that decides it. */
export interface Expect {
  status: number;
  rule: string;
  /** Set when the spec leaves the answer open: a mismatch is a question for the lead (t.todo), not a bug. */
  decide?: string;
}

/** Route-specific rules beyond "permission + visibility" (the per-route lines of the policy table). */
export type Extra = "delete-connection" | "move-to-orgB" | "move-to-personal" | "account-admin";

/**
 * The expected answer to a REST call, in the order the checks are made:
 *  1. a revoked key: 401 (SPEC Errors);
 *  2. the heartbeat route takes only an ingestion key (403 for any other), and an ingestion key
 *     is refused everywhere else (403; SPEC Authentication 4);
 *  3. a key without the route's permission: 403 (SPEC Authentication 3);
 *  4. a connection the key cannot see: 403 (SPEC Errors: "no access to the connection");
 *  5. the route's own rule (see `Extra` and the placement and webhook rules below);
 *  6. otherwise the route's normal status.
 */
export function expectRest(
  route: { auth: string; status: number },
  c: Caller,
  target: Target,
  world: { scopeOf(id: string): Scope },
  extra?: Extra,
): Expect {
  if (c.kind === "revoked") return { status: 401, rule: "revoked key" };
  if (route.auth === "usage-ingestion")
    return c.kind === "ingestion"
      ? { status: route.status, rule: "ingestion key on its heartbeat route" }
      : { status: 403, rule: "only an ingestion key may send heartbeats" };
  if (c.kind === "ingestion") return { status: 403, rule: "an ingestion key only sends heartbeats" };
  if (!c.permissions.has(route.auth as Permission)) return { status: 403, rule: `lacks ${route.auth}` };

  if (target.type === "connection") {
    const scope = world.scopeOf(target.id);
    if (!sees(c, scope)) return { status: 403, rule: "connection not visible" };
    if (extra === "delete-connection" && isOrg(scope) && !manages(roleIn(c.user, scope)))
      return { status: 403, rule: "deleting an org's connection needs admin/owner" };
    if (extra === "move-to-orgB") {
      // moving follows the create rules (docs/api.md: Connections API); moving to where it is is no move
      if (scope === "orgB") return { status: route.status, rule: "already in org B: no move" };
      // taking a connection out of an organization is held to the delete rule (docs/api.md: Connections API, Roles)
      if (isOrg(scope) && !manages(roleIn(c.user, scope)))
        return { status: 403, rule: "leaving an org = deleting from it: admin/owner" };
      if (c.kind === "organization" ? c.org !== "orgB" : !roleIn(c.user, "orgB"))
        return { status: 403, rule: "placing in org B needs a role there / its org key" };
    }
    if (extra === "move-to-personal" && isOrg(scope)) {
      if (c.kind === "organization")
        return { status: 403, rule: "an org key cannot make personal connections" };
      // taking a connection out of an organization removes it from the organization as a
      // delete does: held to the delete rule (src/connections/remove.ts)
      if (!manages(roleIn(c.user, scope)))
        return {
          status: 403,
          rule: "leaving an org = deleting from it: admin/owner (docs/api.md: Connections API, Roles)",
        };
    }
    return { status: route.status, rule: "visible" };
  }
  if (target.type === "placement") {
    // SPEC POST /v1/connections: a role in the organization; an organization key only its own
    const org = target.org === "omitted" ? (c.kind === "organization" ? c.org : "personal") : target.org;
    if (org === "personal" || org === null)
      return c.kind === "organization"
        ? { status: 403, rule: "an org key cannot make personal connections" }
        : { status: route.status, rule: "own personal account" };
    if (c.kind === "organization")
      return c.org === org
        ? { status: route.status, rule: "org key, own org" }
        : { status: 403, rule: "org key, another org" };
    return roleIn(c.user, org)
      ? { status: route.status, rule: `role ${roleIn(c.user, org)} in ${org}` }
      : { status: 403, rule: `no role in ${org}` };
  }
  if (extra === "account-admin" && c.kind === "organization" && c.org && !manages(roleIn(c.user, c.org)))
    return { status: 403, rule: "an org's budget/webhooks need admin/owner" };
  if (target.type === "webhook") {
    if (c.kind === "organization" && c.org && !manages(roleIn(c.user, c.org)))
      return { status: 403, rule: "an org's webhooks need admin/owner" };
    const account = target.account === "own" ? accountOf(c) : target.account;
    return account === accountOf(c)
      ? { status: route.status, rule: "the key's account's webhook" }
      : { status: 404, rule: "another account's webhook is not found" };
  }
  return { status: route.status, rule: "the key's own scope" };
}

export type McpOutcome = "401" | "ok" | "not accessible" | "not a gateway" | `other: ${string}`;

/**
 * The expected outcome of a tool call (SPEC "Tool server"): the user's own visibility; a
 * connection the user cannot see is "not found or not accessible"; get_gateway_usage on another
 * kind is an error; a revoked or expired token is a 401 before any tool runs.
 */
export function expectTool(
  tool: string,
  c: McpCaller,
  target: Target,
  world: { scopeOf(id: string): Scope },
): { outcome: McpOutcome; rule: string } {
  if (c.kind !== "user") return { outcome: "401", rule: `${c.kind} token` };
  if (target.type !== "connection") return { outcome: "ok", rule: "the user's own visibility" };
  if (!sees(c, world.scopeOf(target.id)))
    return { outcome: "not accessible", rule: "connection not visible" };
  if (tool === "get_gateway_usage" && target.kind !== "gateway")
    return { outcome: "not a gateway", rule: "gateway usage of another kind" };
  return { outcome: "ok", rule: "visible" };
}

// --------------------------------------------------------------------------------------------
// The world.
// --------------------------------------------------------------------------------------------

const minutesAgo = (now: Date, m: number) => new Date(now.getTime() - m * 60_000);

export interface MatrixWorld {
  base: Tenants;
  /** For route-samples' `naming` and `ok` builders. */
  routeWorld: RouteWorld;
  callers: Caller[];
  mcpCallers: McpCaller[];
  /** The fixed connections of the matrix: each tenant, each kind. */
  conns: Record<Tenant, Record<Kind, string>>;
  connectionTargets: Extract<Target, { type: "connection" }>[];
  /** The incident opened on each fixed connection. */
  incidents: Map<string, string>;
  scopeOf(id: string): Scope;
  /** Registers a string that belongs to `scopes` (or is a secret nobody may ever be shown). */
  token(value: string, scopes: Scope[] | "secret"): void;
  tokens: Map<string, Scope[] | "secret">;
  /** A fresh connection in a tenant, made by its creator (carol; alice in A; bob's org key in B). */
  freshConnection(tenant: Tenant, kind: Kind, tag: string): Promise<string>;
  /** A fresh open incident on a connection (the previous one of the same kind resolved first). */
  freshIncident(connectionId: string): Promise<string>;
  /** A fresh webhook of an account, made with a key of it. */
  freshWebhook(account: Scope): Promise<string>;
  /** Records a connection made by a matrix call (POST /v1/connections), or moved, in its scope. */
  adopt(connectionId: string, scope: Scope): void;
  /** Each user's e-mail address, and the personal account it names. */
  emailScope: Map<string, Scope>;
  /** Records a connection deleted by a matrix call. */
  forget(connectionId: string): void;
  /** The connections that exist, by scope. */
  live(): Map<string, Scope>;
  removeWebhook(id: string): Promise<void>;
}

/** The key that creates connections and webhooks in each scope. */
function creatorKeys(w: Tenants): Record<Scope, { key: string; org?: Org }> {
  return {
    carol: { key: w.keys.carolPersonal },
    orgA: { key: w.keys.alicePersonal, org: "orgA" },
    orgB: { key: w.keys.bobOrgB, org: "orgB" },
    aliceP: { key: w.keys.alicePersonal },
    bobP: { key: w.keys.bobPersonal },
    daveP: { key: w.keys.davePersonal },
  };
}
const webhookKeys = (w: Tenants): Record<Scope, string> => ({
  carol: w.keys.carolPersonal,
  orgA: w.keys.aliceOrgA,
  orgB: w.keys.bobOrgB,
  aliceP: w.keys.alicePersonal,
  bobP: w.keys.bobPersonal,
  daveP: w.keys.davePersonal,
});

export async function seedMatrixWorld(ta: TestApp): Promise<MatrixWorld> {
  const { app, ctx } = ta;
  const db = ctx.stores.db;
  const base = await seedTenants(ta);
  const now = ctx.now();
  const { users, orgs, keys } = base;

  const tokens = new Map<string, Scope[] | "secret">();
  const scopes = new Map<string, Scope>();
  const token = (value: string, s: Scope[] | "secret") => {
    if (value) tokens.set(value, s);
  };
  const adopt = (id: string, s: Scope) => {
    scopes.set(id, s);
    token(id, [s]);
  };
  const deleted = new Set<string>();
  const scopeOf = (id: string): Scope => {
    const s = scopes.get(id);
    if (!s) throw new Error(`matrix: connection ${id} has no recorded scope`);
    return s;
  };

  // who is who, and what is secret
  for (const s of ["carol", "orgA", "orgB", "aliceP", "bobP", "daveP"] as const) token(marker(s), [s]);
  const userScopes = (u: UserName): Scope[] => [PERSONAL[u], ...(Object.keys(ROLES[u]) as Org[])];
  const emailScope = new Map<string, Scope>();
  for (const u of ["alice", "bob", "dave", "carol"] as const) {
    token(users[u].id, userScopes(u));
    token(users[u].email, userScopes(u));
    emailScope.set(users[u].email, PERSONAL[u]);
  }
  token(orgs.orgA.id, ["orgA"]);
  token(orgs.orgB.id, ["orgB"]);
  token("Org A", ["orgA"]);
  token("Org B", ["orgB"]);
  for (const k of Object.values(keys)) token(k, "secret");
  for (const s of base.secrets) token(s, "secret");
  // seedTenants' own connections
  const seeded: [string, Scope, string][] = [
    [base.conns.PA, "aliceP", "alice n8n"],
    [base.conns.OA, "orgA", "org A make"],
    [base.conns.OB, "orgB", "org B gateway"],
    [base.conns.PB, "bobP", "bob n8n"],
    [base.conns.PC, "carol", "carol n8n"],
  ];
  for (const [id, s, name] of seeded) {
    adopt(id, s);
    token(name, [s]);
  }

  const creators = creatorKeys(base);
  const create = async (s: Scope, kind: Kind, tag: string) => {
    const m = `${marker(s)}${SHORT[kind]}_${tag}`;
    const body: Record<string, unknown> = { service_type: kind, service_name: `${m} conn` };
    if (kind === "workflow_a")
      Object.assign(body, { base_url: "http://127.0.0.1:9", api_key: `sk-${m}-${randomUUID()}` });
    if (kind === "workflow_b") Object.assign(body, { api_token: `tok-${m}-${randomUUID()}`, region: "eu1" });
    const c = creators[s];
    if (c.org) body.organization_id = orgs[c.org].id;
    for (const f of ["api_key", "api_token"])
      if (typeof body[f] === "string") token(body[f] as string, "secret");
    const res = await call(app, c.key, "POST", "/v1/connections", body);
    if (res.statusCode !== 201) throw new Error(`matrix seeding: ${res.statusCode} ${res.body}`);
    const made = res.json() as { connection: { id: string }; ingest_api_key: string | null };
    adopt(made.connection.id, s);
    if (made.ingest_api_key) token(made.ingest_api_key, "secret");
    return { id: made.connection.id, ingest: made.ingest_api_key, name: body.service_name as string };
  };

  // webhooks first, so the alerts below go to them too (their rows name the webhook and origin)
  const hookKeys = webhookKeys(base);
  let hooks = 0;
  const freshWebhook = async (account: Scope) => {
    const url = `https://hooks-${account.toLowerCase()}.example.com/${marker(account)}hook${++hooks}`;
    const res = await call(app, hookKeys[account], "POST", "/v1/webhooks", { url });
    if (res.statusCode !== 201) throw new Error(`matrix webhook: ${res.statusCode} ${res.body}`);
    const made = res.json() as { id: string; secret: string };
    token(made.id, [account]);
    token(made.secret, "secret");
    token(`https://hooks-${account.toLowerCase()}.example.com`, [account]);
    return made.id;
  };
  for (const s of ["carol", "orgA", "orgB", "aliceP", "bobP"] as const) await freshWebhook(s);

  // the three tenants' connections of every kind, with data in every store
  const conns = {} as Record<Tenant, Record<Kind, string>>;
  const names = new Map<string, string>();
  let ingestA = "";
  for (const tenant of TENANTS) {
    conns[tenant] = {} as Record<Kind, string>;
    for (const kind of KINDS) {
      const made = await create(tenant, kind, "fixed");
      conns[tenant][kind] = made.id;
      names.set(made.id, made.name);
      if (tenant === "orgA" && kind === "gateway" && made.ingest) ingestA = made.ingest;
    }
  }
  const fixed = TENANTS.flatMap((tenant) =>
    KINDS.map((kind) => ({ tenant, kind, id: conns[tenant][kind], m: `${marker(tenant)}${SHORT[kind]}` })),
  );
  const series = ctx.stores.series;
  await series.append(
    availabilitySamples,
    fixed.flatMap((c) =>
      [1, 2, 3].map((n) => ({
        ts: minutesAgo(now, n),
        connection_id: c.id,
        available: n !== 2,
        response_time_ms: 100 + n,
        status_code: n === 2 ? 502 : 200,
        reason: n === 2 ? "bad_status" : null,
        error: n === 2 ? `${c.m} status 502` : null,
        synthetic: false,
        source: c.kind === "gateway" ? "heartbeat" : "probe",
      })),
    ),
  );
  await series.append(
    executions,
    fixed
      .filter((c) => c.kind !== "gateway")
      .flatMap((c) =>
        [1, 2].map((n) => ({
          ts: minutesAgo(now, 10 + n),
          connection_id: c.id,
          execution_id: `${c.m}_exec${n}`,
          workflow_id: `${c.m}_wf`,
          status: n === 2 ? "error" : "success",
          mode: "trigger",
          stopped_at: minutesAgo(now, 9 + n),
          duration_ms: 60_000,
          error: n === 2 ? `${c.m} node failed` : null,
          error_node: n === 2 ? `${c.m}_node` : null,
          last_node: `${c.m}_node`,
          updated_at: now,
        })),
      ),
  );
  await series.append(
    usageEntries,
    fixed.map((c) => ({
      ts: minutesAgo(now, 5),
      id: randomUUID(),
      connection_id: c.id,
      entity: `${c.m}_model`,
      usage_amount: 1000,
      usage_entity: "tokens",
      custom_name: null,
      cost_cents: 2,
      workflow_id: `${c.m}_wf`,
      execution_id: `${c.m}_exec1`,
      metadata: JSON.stringify({ note: `${c.m} usage` }),
    })),
  );
  const gateways = fixed.filter((c) => c.kind === "gateway");
  await series.append(
    gatewayHeartbeats,
    gateways.map((c) => ({
      ts: minutesAgo(now, 3),
      connection_id: c.id,
      heartbeat_id: `${c.m}_hb`,
      status: "healthy",
      healthy: true,
      latency_ms: 40,
      version: "2.4.1",
      pid_alive: true,
      system: JSON.stringify({ host: `${c.m}_host` }),
      period_start: minutesAgo(now, 4),
      period_end: minutesAgo(now, 3),
      input_tokens: 3000,
      output_tokens: 1000,
      cache_read_tokens: 0,
      cache_write_tokens: 0,
      request_count: 12,
      cost_usd: 0.5,
      received_at: minutesAgo(now, 3),
    })),
  );
  await series.append(
    gatewayModelUsage,
    gateways.map((c) => ({
      ts: minutesAgo(now, 3),
      connection_id: c.id,
      heartbeat_id: `${c.m}_hb`,
      model: `${c.m}_llm`,
      input_tokens: 3000,
      output_tokens: 1000,
      cost_usd: 0.5,
      cost_source: "reported",
    })),
  );
  await series.waitVisible();

  const incidents = new Map<string, string>();
  const tenantOf: Record<Tenant, { userId: string; organizationId: string | null }> = {
    carol: { userId: users.carol.id, organizationId: null },
    orgA: { userId: users.alice.id, organizationId: orgs.orgA.id },
    orgB: { userId: users.bob.id, organizationId: orgs.orgB.id },
  };
  for (const c of fixed) {
    // an anomaly, and an availability incident with its failure e-mails (the alert history)
    const anomaly = await insertAnomaly(db, {
      connectionId: c.id,
      metric: "response_time",
      detectedAt: minutesAgo(now, 20),
      startedAt: minutesAgo(now, 80),
      windowStart: minutesAgo(now, 80),
      windowEnd: minutesAgo(now, 20),
      observed: 900,
      baselineMean: 120,
      baselineStddev: 40,
      baselineMedian: 118,
      baselineMad: 20,
      bandLow: 60,
      bandHigh: 200,
      score: 19.5,
    });
    token(anomaly, [c.tenant]);
    const incident = await db.transaction((tx) =>
      openIncident(
        tx,
        { connectionId: c.id, connectionName: names.get(c.id) ?? c.m, ...tenantOf[c.tenant] },
        {
          kind: "availability",
          title: `${c.m} is down`,
          detail: { failures: 3, error: `${c.m} refused` },
          at: minutesAgo(now, 15),
          publicUrl: ctx.config.publicUrl,
          failureMailIntervalSeconds: 0,
        },
      ),
    );
    if (!incident) throw new Error("matrix seeding: no incident opened");
    incidents.set(c.id, incident);
    token(incident, [c.tenant]);
  }

  const all = new Set<Permission>(PERMISSIONS);
  const callers: Caller[] = [
    {
      name: "owner",
      label: "owner's personal key (alice, owner of A)",
      key: keys.alicePersonal,
      kind: "personal",
      user: "alice",
      org: null,
      permissions: all,
      connection: null,
    },
    {
      name: "member",
      label: "member's personal key (dave, member of A)",
      key: keys.davePersonal,
      kind: "personal",
      user: "dave",
      org: null,
      permissions: all,
      connection: null,
    },
    {
      name: "otherOrg",
      label: "org key of another org (B, by bob)",
      key: keys.bobOrgB,
      kind: "organization",
      user: "bob",
      org: "orgB",
      permissions: all,
      connection: null,
    },
    {
      name: "sameOrg",
      label: "org key of the same org (A, by alice)",
      key: keys.aliceOrgA,
      kind: "organization",
      user: "alice",
      org: "orgA",
      permissions: all,
      connection: null,
    },
    {
      name: "readOnly",
      label: "read-only key (alice, connections:read)",
      key: keys.aliceReadOnly,
      kind: "personal",
      user: "alice",
      org: null,
      permissions: new Set<Permission>(["connections:read"]),
      connection: null,
    },
    {
      name: "ingestion",
      label: "ingestion key (A's gateway)",
      key: ingestA,
      kind: "ingestion",
      user: "alice",
      org: null,
      permissions: new Set(),
      connection: conns.orgA.gateway,
    },
    {
      name: "revoked",
      label: "revoked key (alice's)",
      key: keys.revoked,
      kind: "revoked",
      user: "alice",
      org: null,
      permissions: all,
      connection: null,
    },
  ];

  // MCP: real OAuth access tokens; one revoked through RFC 7009, one expired
  const mcpToken = (userId: string) => mcpTokenFor(app, ctx, userId);
  const revoked = await mcpToken(users.alice.id);
  await revokeToken(ctx, { token: revoked, clientId: null });
  const expired = (
    await operatorTokens(
      db,
      { secrets: ctx.secrets, publicUrl: ctx.config.publicUrl, now: minutesAgo(ctx.now(), 60) },
      users.alice.id,
    )
  ).access_token;
  const mcpCallers: McpCaller[] = [
    {
      name: "owner",
      label: "owner (alice)",
      token: await mcpToken(users.alice.id),
      user: "alice",
      kind: "user",
    },
    {
      name: "member",
      label: "member (dave)",
      token: await mcpToken(users.dave.id),
      user: "dave",
      kind: "user",
    },
    {
      name: "otherOwner",
      label: "another org's owner (bob)",
      token: await mcpToken(users.bob.id),
      user: "bob",
      kind: "user",
    },
    {
      name: "noOrg",
      label: "user with no org (carol)",
      token: await mcpToken(users.carol.id),
      user: "carol",
      kind: "user",
    },
    { name: "revoked", label: "revoked token (alice's)", token: revoked, user: "alice", kind: "revoked" },
    { name: "expired", label: "expired token (alice's)", token: expired, user: "alice", kind: "expired" },
  ];
  for (const c of mcpCallers) token(c.token, "secret");

  let made = 0;
  const freshConnection = async (tenant: Tenant, kind: Kind, tag: string) =>
    (await create(tenant, kind, `${tag}${++made}`)).id;
  const freshIncident = async (connectionId: string) => {
    await db.query(
      "UPDATE incidents SET status = 'resolved', resolved_at = $2 WHERE connection_id = $1 AND kind = 'anomaly' AND status <> 'resolved'",
      [connectionId, ctx.now().toISOString()],
    );
    const id = await insertOpenIncident(db, {
      connectionId,
      kind: "anomaly",
      title: `${marker(scopeOf(connectionId))} unusual`,
      at: ctx.now(),
    });
    if (!id) throw new Error("matrix: no fresh incident");
    token(id, [scopeOf(connectionId)]);
    return id;
  };

  const routeWorld: RouteWorld = {
    ...base,
    throwaway: "",
    incidents: Object.fromEntries(incidents),
    webhooks: { alice: "", carol: "" },
  };
  return {
    base,
    routeWorld,
    callers,
    mcpCallers,
    conns,
    connectionTargets: fixed.map((c) => ({ type: "connection", tenant: c.tenant, kind: c.kind, id: c.id })),
    incidents,
    scopeOf,
    token,
    tokens,
    freshConnection,
    freshIncident,
    freshWebhook,
    adopt,
    emailScope,
    forget: (id) => deleted.add(id),
    live: () => new Map([...scopes].filter(([id]) => !deleted.has(id))),
    removeWebhook: (id) => deleteWebhookRow(db, id),
  };
}

// --------------------------------------------------------------------------------------------
// Looking for leaks.
// --------------------------------------------------------------------------------------------

const CONNECTION_KEYS = new Set(["connection_id", "connectionId"]);

/**
 * What in an answer belongs to someone the caller may not see:
 *  - any registered string (connection, incident, anomaly, webhook, user and organization ids,
 *    names and markers, e-mail addresses) of a scope the caller does not see, unless the caller
 *    sent it in the request itself (an error naming the id it was asked about reveals nothing);
 *  - any secret (a connection credential, an API or ingestion key, a token, a webhook secret),
 *    whoever asks;
 *  - in a JSON body, any row whose connection_id / connectionId (or, in a `connections` list, id)
 *    is not a connection the caller sees.
 * Returns one line per finding and the scopes the body's rows came from.
 */
export function scan(
  world: Pick<MatrixWorld, "tokens">,
  visible: readonly Scope[],
  scopeOfConnection: (id: string) => Scope | undefined,
  body: string,
  request: string,
): { leaks: string[]; rowScopes: Set<Scope> } {
  const leaks: string[] = [];
  for (const [value, owners] of world.tokens) {
    if (!body.includes(value) || request.includes(value)) continue;
    if (owners === "secret") leaks.push(`secret ${value.slice(0, 12)}…`);
    else if (!owners.some((s) => visible.includes(s))) leaks.push(`${owners.join("/")} data: ${value}`);
  }
  const rowScopes = new Set<Scope>();
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return { leaks, rowScopes };
  }
  const row = (id: unknown, where: string) => {
    if (typeof id !== "string") return;
    const s = scopeOfConnection(id);
    if (!s) leaks.push(`${where}: unknown connection ${id}`);
    else {
      rowScopes.add(s);
      if (!visible.includes(s)) leaks.push(`${where}: a row of ${s}'s connection ${id}`);
    }
  };
  const walk = (v: unknown, parentKey: string) => {
    if (Array.isArray(v)) {
      for (const x of v) {
        if (parentKey === "connections" && x && typeof x === "object")
          row((x as Record<string, unknown>).id, "connections[].id");
        walk(x, parentKey);
      }
    } else if (v && typeof v === "object") {
      for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
        if (CONNECTION_KEYS.has(k)) row(x, k);
        walk(x, k);
      }
    }
  };
  walk(parsed, "");
  return { leaks, rowScopes };
}

/**
 * GET /v1/alerts: every row belongs to an account the caller sees. An alert of an organization
 * names it (organization_id); a personal account's (an audit of its keys, say) has none, and is
 * told to its user's e-mail address or to one of its webhooks, which name the account.
 */
export function alertAccountProblems(
  w: Pick<MatrixWorld, "tokens" | "emailScope" | "base">,
  visible: readonly Scope[],
  body: unknown,
): string[] {
  const orgScope = new Map<string, Scope>([
    [w.base.orgs.orgA.id, "orgA"],
    [w.base.orgs.orgB.id, "orgB"],
  ]);
  const rows = (body as { data?: Record<string, unknown>[] }).data ?? [];
  const problems: string[] = [];
  for (const r of rows) {
    let account: Scope | undefined;
    if (typeof r.organization_id === "string") account = orgScope.get(r.organization_id);
    else if (r.channel === "email") account = w.emailScope.get(String(r.recipient));
    else {
      const owners = typeof r.webhook_id === "string" ? w.tokens.get(r.webhook_id) : undefined;
      account = Array.isArray(owners) ? owners[0] : undefined;
    }
    if (!account || !visible.includes(account))
      problems.push(
        `alert ${String(r.id)} (${String(r.kind)}) belongs to ${account ?? "an unknown account"}`,
      );
  }
  return problems;
}

// --------------------------------------------------------------------------------------------
// Calling the tool server.
// --------------------------------------------------------------------------------------------

/** One tools/call over POST /mcp on the real app (stateless Streamable HTTP, JSON answers). */
export async function callTool(
  ta: TestApp,
  token: string,
  name: string,
  args: Record<string, unknown>,
): Promise<{ outcome: McpOutcome; body: string; request: string }> {
  const request = JSON.stringify({
    jsonrpc: "2.0",
    id: 1,
    method: "tools/call",
    params: { name, arguments: args },
  });
  const res = await ta.app.inject({
    method: "POST",
    url: "/mcp",
    headers: {
      authorization: `Bearer ${token}`,
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      "mcp-protocol-version": LATEST_PROTOCOL_VERSION,
    },
    payload: request,
  });
  if (res.statusCode === 401) return { outcome: "401", body: res.body, request };
  if (res.statusCode !== 200) return { outcome: `other: HTTP ${res.statusCode}`, body: res.body, request };
  const rpc = res.json() as {
    result?: { isError?: boolean; content?: { type: string; text?: string }[] };
    error?: { message: string };
  };
  if (rpc.error) return { outcome: `other: ${rpc.error.message}`, body: res.body, request };
  if (!rpc.result?.isError) return { outcome: "ok", body: res.body, request };
  const text = rpc.result.content?.[0]?.text ?? "";
  if (/was not found or is not accessible to you/.test(text))
    return { outcome: "not accessible", body: res.body, request };
  if (/gateway usage exists only for gateway connections/.test(text))
    return { outcome: "not a gateway", body: res.body, request };
  return { outcome: `other: ${text.slice(0, 80)}`, body: res.body, request };
}

// --------------------------------------------------------------------------------------------
// The printed table.
// --------------------------------------------------------------------------------------------

/** Cells of one row, by target, shown as `carol 403 · orgA 200 · orgB 403` (per kind when they differ). */
export function cells(targets: Target[], values: string[]): string {
  if (targets.length === 1 && targets[0]?.type === "none") return values[0] ?? "";
  const groups = new Map<string, string[]>();
  targets.forEach((t, i) => {
    const g = t.type === "connection" ? t.tenant : targetName(t);
    groups.set(g, [...(groups.get(g) ?? []), values[i] ?? ""]);
  });
  return [...groups]
    .map(([g, vs]) => `${g} ${vs.every((v) => v === vs[0]) ? vs[0] : vs.join("/")}`)
    .join(" · ");
}

export const pad = (s: string, n: number) => (s.length >= n ? s : s + " ".repeat(n - s.length));
