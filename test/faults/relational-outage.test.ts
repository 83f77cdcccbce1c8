import t from "tap";
import { buildApp } from "../../src/app.js";
import { loadConfig } from "../../src/config.js";
import { PERMISSIONS } from "../../src/core/actor.js";
import { closeContext, createContext } from "../../src/core/context.js";
import { createKey, createUser } from "../../src/identity/accounts.js";
import { createLogger } from "../../src/lib/logger.js";
import { migrate } from "../../src/stores/relational/migrate.js";
import { createPgStore } from "../../src/stores/relational/pg.js";
import { createSqlSeriesStore } from "../../src/stores/series/sql.js";
import { StoreSupervisor } from "../../src/stores/supervisor.js";
import { freshDatabaseUrl, requireBackend } from "../helpers/backends.js";
import { cuttableProxy } from "../helpers/proxy.js";
import { call } from "../helpers/tenants.js";

/**
 * PostgreSQL goes away under a running app (a TCP proxy in front of the shared server is cut, so
 * no server is stopped): every request that needs it answers 503 with Retry-After, never 500,
 * and the app answers normally again as soon as the server is reachable, without a restart. The
 * same in-process and in a second, so it also runs where a private cluster cannot be started
 * (store-restart.test.ts stops a real one).
 */
t.test("PostgreSQL unreachable under a running app: 503 with Retry-After, then back", async (t) => {
  if (!(await requireBackend(t, "postgres"))) return;
  const direct = new URL(await freshDatabaseUrl(t));
  const proxy = await cuttableProxy(direct);
  t.teardown(() => proxy.close());
  const viaProxy = new URL(direct);
  viaProxy.port = String(proxy.port);
  const db = createPgStore({ connectionString: viaProxy.toString(), max: 4 });
  t.teardown(() => db.close());
  await migrate(db);
  const config = loadConfig({
    LOG_LEVEL: "silent",
    VIGIL_SECRET: "outage-secret-outage-secret-outage-secret",
  });
  const log = createLogger("silent");
  const stores = StoreSupervisor.ready({ db, series: createSqlSeriesStore(db) }, log, config);
  const ctx = createContext(config, log, stores);
  t.teardown(() => closeContext(ctx));
  const app = await buildApp(ctx);
  t.teardown(() => app.close());

  const user = await createUser(db, { email: "o@x.example", plan: "enterprise" });
  const { key } = await createKey(db, { user: user.id, permissions: [...PERMISSIONS] });
  const created = await call(app, key, "POST", "/v1/connections", {
    service_type: "gateway",
    service_name: "gw",
  });
  t.equal(created.statusCode, 201);
  const { connection, ingest_api_key: ingestKey } = created.json() as {
    connection: { id: string };
    ingest_api_key: string;
  };
  const heartbeat = {
    type: "heartbeat",
    gateway: { status: "healthy", latencyMs: 3, version: "1" },
    tokens: {
      period: {
        inputTokens: 1,
        outputTokens: 1,
        startedAt: new Date(Date.now() - 2000).toISOString(),
        endedAt: new Date(Date.now() - 1000).toISOString(),
      },
    },
  };
  const requests: [string, () => ReturnType<typeof call>][] = [
    ["GET /v1/connections", () => call(app, key, "GET", "/v1/connections")],
    ["GET /v1/connections/:id", () => call(app, key, "GET", `/v1/connections/${connection.id}`)],
    ["GET /v1/incidents", () => call(app, key, "GET", "/v1/incidents")],
    ["GET /v1/usage", () => call(app, key, "GET", `/v1/usage?connection_id=${connection.id}`)],
    ["PUT /v1/usage", () => call(app, key, "PUT", `/v1/usage?connection_id=${connection.id}`)],
    [
      "POST /v1/usage",
      () =>
        call(app, key, "POST", "/v1/usage", { connection_id: connection.id, entity: "e", usage_amount: 1 }),
    ],
    ["POST /v1/gateway/ingest", () => call(app, ingestKey, "POST", "/v1/gateway/ingest", heartbeat)],
    [
      "POST /v1/connections",
      () => call(app, key, "POST", "/v1/connections", { service_type: "gateway", service_name: "gw2" }),
    ],
  ];
  for (const [name, r] of requests)
    t.ok((await r()).statusCode < 300, `${name} answers while PostgreSQL is up`);

  const cutAt = Date.now();
  proxy.cut();
  for (const [name, r] of requests) {
    const res = await r();
    t.equal(res.statusCode, 503, `${name}: 503 while PostgreSQL is unreachable`);
    t.ok(Number(res.headers["retry-after"]) > 0, `${name}: with Retry-After`);
    t.notMatch(
      res.body,
      /127\.0\.0\.1|ECONNREFUSED|terminated/,
      `${name}: naming no address or driver error`,
    );
  }
  t.equal((await app.inject({ method: "GET", url: "/readyz" })).statusCode, 503, "/readyz says not ready");
  t.ok(stores.outageWithin(cutAt, Date.now()) > 0, "the supervisor saw the outage");

  proxy.restore();
  for (const [name, r] of requests.slice(0, 5))
    t.equal(
      (await r()).statusCode,
      200,
      `${name} answers again once PostgreSQL is reachable, without a restart`,
    );
  t.equal((await app.inject({ method: "GET", url: "/readyz" })).statusCode, 200);
});
