import t from "tap";
import { z } from "zod";
import { PERMISSIONS } from "../../src/core/actor.js";
import { createKey } from "../../src/identity/accounts.js";
import type { Route } from "../../src/http/route.js";
import { routes } from "../../src/http/routes/index.js";
import { testApp } from "../helpers/app.js";
import { routeKey, routeSamples, type SampleRequest, seedRouteWorld } from "../helpers/route-samples.js";

/**
 * The authentication and authorization checks every route needs, written once and run for
 * every authenticated route of the table (Unkey's shared route security tests): a route added
 * to the table is covered without a new test. Per route:
 *  - no key, a malformed header, a revoked key: 401 in the envelope (INVALID_API_KEY);
 *  - a key lacking the route's permission: 403; a usage-ingestion key on any other route: 403;
 *    a normal key on the heartbeat route: 403;
 *  - another tenant's connection (path id, or connection_id in the query or body): 403; an
 *    absent one: 404 (spec: Errors), in the route's error style;
 *  - a path naming an account's own resource (a webhook): another account's and an absent one
 *    are both 404, so its existence is not revealed;
 *  - X-RateLimit-Limit/Remaining/Reset on every answer to an authenticated key.
 */

const ABSENT = "00000000-0000-4000-8000-000000000000";

/** Does the route name a connection, so the cross-tenant checks apply? Read from its schemas. */
function namesConnection(r: Route): boolean {
  if (r.params) return true;
  return [r.query, r.body].some(
    (s) =>
      s !== undefined &&
      JSON.stringify(z.toJSONSchema(s, { io: "input", unrepresentable: "any" })).includes('"connection_id"'),
  );
}

t.test("security suite over the route table", async (t) => {
  const ta = await testApp(t);
  const { app, ctx } = ta;
  const w = await seedRouteWorld(ta);
  const alice = w.users.alice.id;
  // one key per permission, holding every permission but that one
  const lacking = new Map<string, string>();
  for (const p of PERMISSIONS)
    lacking.set(
      p,
      (await createKey(ctx.stores.db, { user: alice, permissions: PERMISSIONS.filter((x) => x !== p) })).key,
    );

  // a route declared public by mistake would escape every check below
  t.same(
    routes.filter((r) => r.auth === "public").map(routeKey),
    ["GET /healthz", "GET /readyz"],
    "only the health probes are public",
  );
  const authenticated = routes.filter((r) => r.auth !== "public");
  t.ok(authenticated.length >= 14, "the table's authenticated routes are walked");
  // DELETE last: its valid sample removes a connection
  const ordered = [...authenticated].sort(
    (a, b) => Number(a.method === "DELETE") - Number(b.method === "DELETE"),
  );

  for (const route of ordered) {
    const name = routeKey(route);
    const sample = routeSamples[name];
    if (!sample) {
      t.fail(`${name} has no sample request in test/helpers/route-samples.ts`);
      continue;
    }
    const [valid] = sample.ok(w);
    if (!valid) {
      t.fail(`${name} has no valid sample request`);
      continue;
    }
    const send = (key: string | null, req: SampleRequest = valid, headers: Record<string, string> = {}) =>
      app.inject({
        method: route.method,
        url: req.url,
        headers: { ...(key ? { authorization: `Bearer ${key}` } : {}), ...headers },
        ...(req.body === undefined ? {} : { payload: req.body as Record<string, unknown> }),
      });

    await t.test(name, async (t) => {
      const unauthenticated = (label: string, res: Awaited<ReturnType<typeof send>>) => {
        t.equal(res.statusCode, 401, `${label}: 401`);
        t.match(
          res.json(),
          { success: false, error: { code: "INVALID_API_KEY", message: String } },
          `${label}: the envelope`,
        );
      };
      unauthenticated("no key", await send(null));
      unauthenticated("revoked key", await send(w.keys.revoked));
      unauthenticated("unknown key", await send("vgl_0000000000000000000000000000"));
      unauthenticated(
        "malformed header",
        await send(null, valid, { authorization: `Basic ${w.keys.alicePersonal}` }),
      );

      const rateHeaders = (label: string, res: Awaited<ReturnType<typeof send>>) => {
        for (const h of ["x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset"])
          t.match(res.headers[h], /^\d+$/, `${label}: ${h}`);
      };
      /** A refusal in the route's own error style. */
      const refused = (label: string, res: Awaited<ReturnType<typeof send>>, status: number) => {
        t.equal(res.statusCode, status, `${label}: ${status}`, { body: res.body });
        const body = res.json() as Record<string, unknown>;
        if (route.errorStyle === "simple") t.match(body, { error: String }, `${label}: {error}`);
        else
          t.match(
            body,
            { success: false, error: { code: status === 403 ? "FORBIDDEN" : "NOT_FOUND" } },
            `${label}: the envelope`,
          );
        rateHeaders(label, res);
      };

      if (route.auth === "usage-ingestion") {
        refused("a normal key on the heartbeat route", await send(w.keys.alicePersonal), 403);
      } else {
        const without = lacking.get(route.auth);
        t.ok(without, `a key lacking ${route.auth}`);
        if (without) refused(`a key lacking ${route.auth}`, await send(without), 403);
        refused("a usage-ingestion key", await send(w.keys.ingest), 403);
        // alice's read-only key holds connections:read only
        if (route.auth !== "connections:read")
          refused("a read-only key", await send(w.keys.aliceReadOnly), 403);
      }

      if (sample.hidden) {
        for (const req of sample.hidden(w))
          refused(`another account's or an absent ${req.url}`, await send(req.key, req), 404);
      } else if (namesConnection(route)) {
        t.ok(sample.naming, `${name} names a connection: its sample says how`);
        if (sample.naming) {
          const foreign = sample.naming(w, w.conns.PC);
          refused("another tenant's connection", await send(foreign.key, foreign), 403);
          const absent = sample.naming(w, ABSENT);
          refused("an absent connection", await send(absent.key, absent), 404);
        }
      }

      const ok = await send(valid.key);
      const status = valid.status ?? route.status;
      t.equal(ok.statusCode, status, `the valid request: ${status}`, { body: ok.body });
      rateHeaders("the valid request", ok);
    });
  }
});

/**
 * What each endpoint requires, as SPEC.md's Endpoints section writes it. The suite above proves
 * each route enforces the permission it declares; this proves the declaration is the spec's, so a
 * route declared with the wrong permission (or made public) fails here.
 */
const SPEC_PERMISSIONS: Record<string, string> = {
  "GET /v1/connections": "connections:read",
  "POST /v1/connections": "connections:write",
  "GET /v1/connections/:id": "connections:read",
  "PUT /v1/connections/:id": "connections:write",
  "DELETE /v1/connections/:id": "connections:delete",
  "POST /v1/usage": "usage:write",
  "GET /v1/usage": "usage:read",
  "PUT /v1/usage": "usage:read",
  // budgets (issue #14, docs/api.md: Budgets): set like a connection, read like usage
  "PUT /v1/connections/:id/budget": "connections:write",
  "GET /v1/connections/:id/budget": "usage:read",
  "PUT /v1/budget": "connections:write",
  "GET /v1/budget": "usage:read",
  // SLOs (issue #33, docs/api.md: SLOs): set and removed like a connection, read like one
  "PUT /v1/connections/:id/slo": "connections:write",
  "GET /v1/connections/:id/slo": "connections:read",
  "DELETE /v1/connections/:id/slo": "connections:write",
  "GET /v1/analytics": "analytics:read",
  "GET /v1/executions": "analytics:read",
  "GET /v1/availability": "analytics:read",
  "GET /v1/availability/summary": "analytics:read",
  "GET /v1/incidents": "analytics:read",
  // incident lifecycle and alert history (issue #14, docs/operations.md: Incidents; docs/api.md: Alerts): acknowledging
  // changes monitoring state, so it needs connections:write (analytics:read is read-only)
  "GET /v1/incidents/:id": "analytics:read",
  "POST /v1/incidents/:id/acknowledge": "connections:write",
  "GET /v1/alerts": "analytics:read",
  "GET /v1/anomalies": "analytics:read",
  // outbound webhooks (issue #14 point 5, docs/webhooks.md): managed like a connection; listed
  // with connections:read (the list shows no URL and no secret)
  "POST /v1/webhooks": "connections:write",
  "GET /v1/webhooks": "connections:read",
  "DELETE /v1/webhooks/:id": "connections:write",
  // notification channels, routing rules and the owners' e-mail switch (docs/channels.md): managed
  // like webhooks; listed with connections:read (no secret setting is ever answered)
  "POST /v1/channels": "connections:write",
  "GET /v1/channels": "connections:read",
  "GET /v1/channels/:id": "connections:read",
  "PUT /v1/channels/:id": "connections:write",
  "DELETE /v1/channels/:id": "connections:write",
  "POST /v1/channels/:id/test": "connections:write",
  "POST /v1/routing-rules": "connections:write",
  "GET /v1/routing-rules": "connections:read",
  "GET /v1/routing-rules/:id": "connections:read",
  "PUT /v1/routing-rules/:id": "connections:write",
  "DELETE /v1/routing-rules/:id": "connections:write",
  "GET /v1/notification-settings": "connections:read",
  "PUT /v1/notification-settings": "connections:write",
  // maintenance windows (docs/maintenance.md): managed like webhooks
  "POST /v1/maintenance-windows": "connections:write",
  "GET /v1/maintenance-windows": "connections:read",
  "GET /v1/maintenance-windows/:id": "connections:read",
  "DELETE /v1/maintenance-windows/:id": "connections:write",
  // status pages and their incident posts (issue #34, docs/status-pages.md): managed like
  // maintenance windows; visitors read the pages outside the API, without a key
  "POST /v1/status-pages": "connections:write",
  "GET /v1/status-pages": "connections:read",
  "GET /v1/status-pages/:id": "connections:read",
  "PUT /v1/status-pages/:id": "connections:write",
  "DELETE /v1/status-pages/:id": "connections:write",
  "POST /v1/status-pages/:id/incidents": "connections:write",
  "GET /v1/status-pages/:id/incidents": "connections:read",
  "GET /v1/status-pages/:id/incidents/:incident_id": "connections:read",
  "POST /v1/status-pages/:id/incidents/:incident_id/updates": "connections:write",
  "DELETE /v1/status-pages/:id/incidents/:incident_id": "connections:write",
  "POST /v1/gateway/ingest": "usage-ingestion",
  // not in the spec's tables: liveness and readiness probes for load balancers (docs/api.md: Health endpoints)
  "GET /healthz": "public",
  "GET /readyz": "public",
};

t.test("every route declares the permission the spec gives it", async (t) => {
  const declared = Object.fromEntries(routes.map((r) => [`${r.method} ${r.path}`, r.auth]));
  t.same(
    declared,
    SPEC_PERMISSIONS,
    "route table permissions = the spec's, and no route is missing or extra",
  );
});
