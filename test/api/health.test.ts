import t from "tap";
import { buildApp } from "../../src/app.js";
import { closeContext, createContext } from "../../src/core/context.js";
import { loadConfig } from "../../src/config.js";
import { createLogger } from "../../src/lib/logger.js";
import { StoreSupervisor } from "../../src/stores/supervisor.js";
import { testApp } from "../helpers/app.js";

t.test("healthz, readyz, JSON 404, request ids", async (t) => {
  const { app } = await testApp(t);

  const health = await app.inject({ method: "GET", url: "/healthz" });
  t.equal(health.statusCode, 200);
  t.same(health.json(), { status: "ok" });

  const ready = await app.inject({ method: "GET", url: "/readyz" });
  t.equal(ready.statusCode, 200);
  t.same(ready.json(), {
    status: "ready",
    stores: { relational: { backend: "pglite", ok: true }, series: { backend: "pglite", ok: true } },
  });

  const missing = await app.inject({ method: "GET", url: "/v1/nothing-here?x=1" });
  t.equal(missing.statusCode, 404);
  t.same(missing.json(), {
    success: false,
    error: { code: "NOT_FOUND", message: "No route GET /v1/nothing-here.", details: {} },
  });

  const given = await app.inject({
    method: "GET",
    url: "/healthz",
    headers: { "x-request-id": "trace-abc.123" },
  });
  t.equal(given.headers["x-request-id"], "trace-abc.123", "a caller's request id is kept");
  const generated = await app.inject({
    method: "GET",
    url: "/healthz",
    headers: { "x-request-id": "bad id!" },
  });
  t.match(generated.headers["x-request-id"], /^[0-9a-f-]{36}$/, "an unusable one is replaced");
});

t.test("readyz answers 503 naming the store that is not reachable", async (t) => {
  const config = loadConfig({
    DATABASE_URL: "postgres://postgres@127.0.0.1:1/none",
    LOG_LEVEL: "silent",
    VIGIL_SECRET: "test-secret-test-secret-test-secret-0123",
  });
  const log = createLogger("silent");
  const stores = new StoreSupervisor(config, log, () => {});
  stores.start();
  t.teardown(() => stores.close());
  const ctx = createContext(config, log, stores);
  t.teardown(() => closeContext(ctx));
  const app = await buildApp(ctx);
  t.teardown(() => app.close());
  // let the first connection attempt fail
  await new Promise((r) => setTimeout(r, 300));
  const res = await app.inject({ method: "GET", url: "/readyz" });
  t.equal(res.statusCode, 503);
  const body = res.json();
  t.equal(body.status, "not_ready");
  t.match(body.error, /relational store \(postgres\): .*ECONNREFUSED/);
  t.equal(body.stores.relational.ok, false);
  t.equal((await app.inject({ method: "GET", url: "/healthz" })).statusCode, 200, "still alive");
});
