import path from "node:path";
import t from "tap";
import { ConfigError, loadConfig } from "../src/config.js";

t.test("defaults: embedded stores, 127.0.0.1:8080, ./data", async (t) => {
  const c = loadConfig({});
  t.equal(c.databaseUrl, undefined);
  t.equal(c.questdb, undefined);
  t.equal(c.host, "127.0.0.1");
  t.equal(c.port, 8080);
  t.equal(c.publicUrl, "http://127.0.0.1:8080");
  t.equal(c.dataDir, path.resolve("./data"));
});

t.test("QUESTDB_PG_URL is derived from QUESTDB_URL", async (t) => {
  const c = loadConfig({ QUESTDB_URL: "http://db.internal:9000/" });
  t.same(c.questdb, {
    httpUrl: "http://db.internal:9000",
    pgUrl: "postgres://admin:quest@db.internal:8812/qdb",
  });
});

t.test("a bad value names the variable", async (t) => {
  const cases: [Record<string, string>, RegExp][] = [
    [{ PORT: "eighty" }, /PORT: must be a port number/],
    [{ PORT: "70000" }, /PORT: must be between 0 and 65535/],
    [{ DATABASE_URL: "mysql://x" }, /DATABASE_URL: must be a postgres: or postgresql: URL/],
    [{ QUESTDB_URL: "127.0.0.1:9000" }, /QUESTDB_URL: must be a http: or https: URL/],
    [{ VIGIL_SECRET: "short" }, /VIGIL_SECRET: must be at least 32 characters/],
    [{ LOG_LEVEL: "loud" }, /LOG_LEVEL:/],
    [{ INGEST_MAX_BACKLOG_ROWS: "10" }, /INGEST_MAX_BACKLOG_ROWS: must be at least 100/],
    [{ INGEST_MAX_BACKLOG_ROWS: "lots" }, /INGEST_MAX_BACKLOG_ROWS: must be a whole number/],
    [{ QUESTDB_PG_URL: "postgres://a@b/c" }, /QUESTDB_PG_URL: is set but QUESTDB_URL is not/],
    [{ WEBHOOK_ALLOW_HTTP_LOOPBACK: "yes" }, /WEBHOOK_ALLOW_HTTP_LOOPBACK: must be true or false/],
  ];
  for (const [env, message] of cases) {
    t.throws(() => loadConfig(env), { name: ConfigError.name, message }, JSON.stringify(env));
  }
});

t.test("empty values count as unset", async (t) => {
  t.equal(loadConfig({ DATABASE_URL: "", PORT: "" }).port, 8080);
  t.equal(loadConfig({ INGEST_MAX_BACKLOG_ROWS: "" }).ingest.maxBacklogRows, 50_000);
});

t.test("WEBHOOK_ALLOW_HTTP_LOOPBACK: false unless set to true (or 1)", async (t) => {
  t.equal(loadConfig({}).webhooks.allowHttpLoopback, false);
  t.equal(loadConfig({ WEBHOOK_ALLOW_HTTP_LOOPBACK: "" }).webhooks.allowHttpLoopback, false);
  t.equal(loadConfig({ WEBHOOK_ALLOW_HTTP_LOOPBACK: "false" }).webhooks.allowHttpLoopback, false);
  t.equal(loadConfig({ WEBHOOK_ALLOW_HTTP_LOOPBACK: "0" }).webhooks.allowHttpLoopback, false);
  t.equal(loadConfig({ WEBHOOK_ALLOW_HTTP_LOOPBACK: "true" }).webhooks.allowHttpLoopback, true);
  t.equal(loadConfig({ WEBHOOK_ALLOW_HTTP_LOOPBACK: "TRUE" }).webhooks.allowHttpLoopback, true);
  t.equal(loadConfig({ WEBHOOK_ALLOW_HTTP_LOOPBACK: "1" }).webhooks.allowHttpLoopback, true);
});
