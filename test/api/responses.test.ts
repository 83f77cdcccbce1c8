import { Ajv2020 } from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import t from "tap";
import { PERMISSIONS } from "../../src/core/actor.js";
import { routes } from "../../src/http/routes/index.js";
import { createKey, createUser } from "../../src/identity/accounts.js";
import { API_RATE_LIMIT_PER_HOUR } from "../../src/identity/plans.js";
import { testApp } from "../helpers/app.js";
import { type BackendName, requireBackend } from "../helpers/backends.js";
import { at, routeKey, routeSamples, seedRouteWorld } from "../helpers/route-samples.js";
import { call } from "../helpers/tenants.js";
import { clearOfHourEnd } from "../helpers/hours.js";

/**
 * The document cannot drift: every route of the table is called with real requests over a
 * seeded world, and each real body is validated (ajv, JSON Schema 2020-12 as OpenAPI 3.1 uses)
 * against the schema /v1/openapi.json gives for that route and status. Response schemas close
 * their objects (`additionalProperties: false`), so an undocumented field fails as well as a
 * missing or mistyped one. A few error bodies are checked the same way.
 */

type Doc = {
  paths: Record<
    string,
    Record<string, { responses: Record<string, { content?: Record<string, { schema: object }> }> }>
  >;
  components: {
    responses: Record<string, { content?: Record<string, { schema: object }> }>;
  };
};

function validatorFor(doc: Doc) {
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats.default(ajv);
  const cache = new Map<string, ReturnType<typeof ajv.compile>>();
  return (method: string, path: string, status: number) => {
    const key = `${method} ${path} ${status}`;
    let v = cache.get(key);
    if (!v) {
      const docPath = path.replace(/:(\w+)/g, "{$1}");
      let answer = doc.paths[docPath]?.[method.toLowerCase()]?.responses[String(status)];
      // the answers given before a route runs (413, 414, 415, 431, 405) are shared components
      const shared = (answer as { $ref?: string } | undefined)?.$ref;
      if (shared) answer = doc.components.responses[shared.replace("#/components/responses/", "")];
      const schema = answer?.content?.["application/json"]?.schema;
      if (!schema) return undefined;
      // references point into the document's components, carried along for ajv to resolve
      v = ajv.compile({ ...schema, components: doc.components });
      cache.set(key, v);
    }
    return v;
  };
}

// relational store x series store: PGlite alone, PostgreSQL alone, PGlite with QuestDB
const backends: ["pglite" | "postgres", BackendName][] = [
  ["pglite", "pglite"],
  ["postgres", "postgres"],
  ["pglite", "questdb"],
];
for (const [relational, series] of backends) {
  t.test(`every route's real answers match /v1/openapi.json (${relational}, ${series})`, async (t) => {
    if (!(await requireBackend(t, relational)) || !(await requireBackend(t, series))) return;
    const ta = await testApp(t, { relational, series });
    const { app } = ta;
    const w = await seedRouteWorld(ta);
    const doc = (await app.inject({ method: "GET", url: "/v1/openapi.json" })).json() as Doc;
    const validator = validatorFor(doc);

    const check = (method: string, path: string, status: number, body: unknown, what: string) => {
      const validate = validator(method, path, status);
      if (!validate) return t.fail(`${what}: the document has no ${status} body for ${method} ${path}`);
      if (!validate(body)) t.fail(`${what}: ${JSON.stringify(validate.errors)}\n${JSON.stringify(body)}`);
      else t.pass(`${what} matches the document`);
    };

    // DELETE last: the others may name the connections it removes
    const ordered = [...routes].sort((a, b) => Number(a.method === "DELETE") - Number(b.method === "DELETE"));
    for (const route of ordered) {
      const sample = routeSamples[routeKey(route)];
      if (!sample) {
        t.fail(`${routeKey(route)} has no sample request in test/helpers/route-samples.ts`);
        continue;
      }
      for (const req of sample.ok(w)) {
        const what = `${route.method} ${req.url}`;
        const res = await call(app, req.key, route.method, req.url, req.body);
        const status = req.status ?? route.status;
        t.equal(res.statusCode, status, `${what} answers ${status}`, { body: res.body });
        const body: unknown = res.json();
        check(route.method, route.path, res.statusCode, body, what);
        if (req.rows) {
          const rows = at(body, req.rows);
          t.ok(Array.isArray(rows) && rows.length > 0, `${what}: ${req.rows} has rows to validate`);
        }
      }
    }

    // error bodies: the route's own style, the envelope for authentication failures
    const { PA, PC } = w.conns;
    const alice = w.keys.alicePersonal;
    const errors: [string, string, string | null, unknown, number][] = [
      ["GET", "/v1/availability?limit=0", alice, undefined, 400],
      ["GET", "/v1/availability?cursor=forged.cursor", alice, undefined, 400],
      ["POST", "/v1/usage", alice, [{ connection_id: PA }, { entity: "x" }], 400],
      ["POST", "/v1/connections", alice, { service_type: "nope" }, 400],
      ["GET", "/v1/connections", null, undefined, 401],
      ["GET", "/v1/executions", "vgl_not_a_key", undefined, 401],
      ["GET", `/v1/connections/${PC}`, alice, undefined, 403],
      ["GET", `/v1/incidents?connection_id=${PC}`, alice, undefined, 403],
      ["GET", "/v1/connections/00000000-0000-4000-8000-000000000000", alice, undefined, 404],
      ["PUT", "/v1/usage?connection_id=00000000-0000-4000-8000-000000000000", alice, undefined, 404],
      ["POST", "/v1/gateway/ingest", w.keys.ingest, { type: "heartbeat", pad: "x".repeat(70_000) }, 413],
      // answered before the route runs: a URL over 8 KiB, in the route's own error style
      ["GET", `/v1/connections?service_name=${"x".repeat(9000)}`, alice, undefined, 414],
      ["GET", `/v1/availability?cursor=${"x".repeat(9000)}`, alice, undefined, 414],
    ];
    for (const [method, url, key, body, status] of errors) {
      const res = await call(app, key, method as "GET", url, body);
      t.equal(res.statusCode, status, `${method} ${url.slice(0, 60)} answers ${status}`, { body: res.body });
      const path = routes.find((r) => r.method === method && matches(r.path, url))?.path;
      if (!path) {
        t.fail(`no route for ${method} ${url}`);
        continue;
      }
      check(method, path, status, res.json(), `${status} of ${method} ${path}`);
    }

    // 415: a body that is not JSON, in the route's error style
    for (const [url, style] of [
      ["/v1/connections", "error"],
      ["/v1/usage", "success"],
    ] as const) {
      const res = await app.inject({
        method: "POST",
        url,
        headers: { authorization: `Bearer ${alice}`, "content-type": "text/plain" },
        payload: "hello",
      });
      t.equal(res.statusCode, 415, `POST ${url} with a text body answers 415`);
      t.ok(style in res.json(), `in the route's error style (${style})`);
      check("POST", url, 415, res.json(), `415 of POST ${url}`);
    }

    // 429: a free-plan account past its hourly budget
    await clearOfHourEnd();
    const free = await createUser(ta.ctx.stores.db, { email: "frank@f.example", plan: "free" });
    const frank = (await createKey(ta.ctx.stores.db, { user: free.id, permissions: [...PERMISSIONS] })).key;
    let limited;
    for (let i = 0; i <= API_RATE_LIMIT_PER_HOUR.free && !limited; i++) {
      const res = await call(app, frank, "GET", "/v1/anomalies?limit=1");
      if (res.statusCode === 429) limited = res;
    }
    t.ok(limited, "the free plan's budget runs out");
    if (limited) check("GET", "/v1/anomalies", 429, limited.json(), "429 of GET /v1/anomalies");
  });
}

/** Does a table path (`/v1/connections/:id`) match a request URL? */
function matches(path: string, url: string): boolean {
  const re = new RegExp(`^${path.replace(/:\w+/g, "[^/?]+")}(\\?|$)`);
  return re.test(url);
}
