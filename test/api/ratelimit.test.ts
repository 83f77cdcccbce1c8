import t from "tap";
import { createKey, createUser } from "../../src/identity/accounts.js";
import { PERMISSIONS } from "../../src/core/actor.js";
import { testApp } from "../helpers/app.js";
import { requireBackend } from "../helpers/backends.js";
import { clearOfHourEnd } from "../helpers/hours.js";
import { call } from "../helpers/tenants.js";
import { keyStore } from "../../src/identity/keys.js";
import { mcpTokenFor } from "../helpers/oauth.js";
import { LATEST_PROTOCOL_VERSION } from "@modelcontextprotocol/sdk/types.js";

t.test("free plan: 100 requests an hour per account, then 429 with Retry-After", async (t) => {
  await clearOfHourEnd();
  const ta = await testApp(t);
  const db = ta.ctx.stores.db;
  const user = await createUser(db, { email: "free@x.example", plan: "free" });
  // two keys of one account share one budget: more keys do not buy more requests
  const k1 = (await createKey(db, { user: user.id, permissions: [...PERMISSIONS] })).key;
  const k2 = (await createKey(db, { user: user.id, permissions: ["connections:read"] })).key;
  let last = 0;
  for (let i = 0; i < 100; i++) {
    const r = await call(ta.app, i % 2 ? k1 : k2, "GET", "/v1/connections");
    t.equal(r.statusCode, 200);
    t.equal(r.headers["x-ratelimit-limit"], "100");
    last = Number(r.headers["x-ratelimit-remaining"]);
    if (i === 0) t.equal(last, 99);
    t.ok(Number(r.headers["x-ratelimit-reset"]) > Date.now() / 1000, "reset is a future Unix time");
  }
  t.equal(last, 0);
  const over = await call(ta.app, k1, "GET", "/v1/connections");
  t.equal(over.statusCode, 429);
  t.equal(over.headers["x-ratelimit-remaining"], "0");
  const retryAfter = Number(over.headers["retry-after"]);
  t.ok(retryAfter >= 1 && retryAfter <= 3600, `Retry-After ${retryAfter}`);
  t.match(over.json(), {
    success: false,
    error: {
      code: "RATE_LIMITED",
      message: /100 requests per hour/,
      details: { limit: 100, retry_after: retryAfter },
    },
  });
});

t.test("pro plan is 1,000 an hour; the count is shared by two nodes on one Postgres", async (t) => {
  await clearOfHourEnd();
  if (!(await requireBackend(t, "postgres"))) return;
  const fast = { limiter: { syncMs: 20 } };
  const a = await testApp(t, { relational: "postgres", context: fast });
  const b = await testApp(t, { sameStoresAs: a, context: fast });
  const db = a.ctx.stores.db;
  const user = await createUser(db, { email: "pro@x.example", plan: "pro" });
  const key = (await createKey(db, { user: user.id, permissions: [...PERMISSIONS] })).key;
  const first = await call(a.app, key, "GET", "/v1/connections");
  t.equal(first.headers["x-ratelimit-limit"], "1000");
  await db.query("UPDATE users SET rate_limit_per_hour = 30 WHERE id = $1", [user.id]);
  keyStore(a.ctx).invalidate();
  keyStore(b.ctx).invalidate();

  let ok = 0;
  let limited = 0;
  for (let i = 0; i < 40; i++) {
    const r = await call(i % 2 ? a.app : b.app, key, "GET", "/v1/connections");
    if (r.statusCode === 200) ok++;
    else if (r.statusCode === 429) limited++;
    await new Promise((r) => setTimeout(r, 25));
  }
  // 1 request before the custom limit + 30 allowed by the limit, counted across both nodes
  t.ok(ok <= 31 && ok >= 28, `both nodes together admitted ${ok} of 40`);
  t.equal(ok + limited, 40);
});

t.test("a revoked key stops within the cache TTL on another node, at once on its own", async (t) => {
  if (!(await requireBackend(t, "postgres"))) return;
  const a = await testApp(t, { relational: "postgres", context: { keys: { ttlMs: 300 } } });
  const b = await testApp(t, { sameStoresAs: a, context: { keys: { ttlMs: 300 } } });
  const db = a.ctx.stores.db;
  const user = await createUser(db, { email: "rev@x.example", plan: "enterprise" });
  const k = await createKey(db, { user: user.id, permissions: [...PERMISSIONS] });
  t.equal((await call(a.app, k.key, "GET", "/v1/connections")).statusCode, 200);
  t.equal((await call(b.app, k.key, "GET", "/v1/connections")).statusCode, 200);
  await db.query("UPDATE api_keys SET revoked_at = now() WHERE id = $1", [k.id]);
  keyStore(a.ctx).invalidate((p) => p.keyId === k.id); // what `vigil admin revoke-key` does on the node that serves it
  t.equal(
    (await call(a.app, k.key, "GET", "/v1/connections")).statusCode,
    401,
    "at once where it was revoked",
  );
  await new Promise((r) => setTimeout(r, 350));
  t.equal((await call(b.app, k.key, "GET", "/v1/connections")).statusCode, 401, "within the TTL elsewhere");
});

t.test("warm keys need no database read; last_used_at is recorded in batches", async (t) => {
  const ta = await testApp(t);
  const db = ta.ctx.stores.db;
  const user = await createUser(db, { email: "warm@x.example", plan: "enterprise" });
  const k = await createKey(db, { user: user.id, permissions: [...PERMISSIONS] });
  t.ok(await keyStore(ta.ctx).authenticate(k.key));
  // Remove the row behind the cache's back: a warm key is still answered from memory.
  await db.query("UPDATE api_keys SET key_hash = 'moved' WHERE id = $1", [k.id]);
  t.ok(await keyStore(ta.ctx).authenticate(k.key), "answered from the cache");
  await db.query("UPDATE api_keys SET key_hash = $2 WHERE id = $1", [
    k.id,
    (await import("../../src/identity/keys.js")).hashKey(k.key),
  ]);
  const before = await db.query<{ last_used_at: Date | null }>(
    "SELECT last_used_at FROM api_keys WHERE id = $1",
    [k.id],
  );
  t.equal(before.rows[0]?.last_used_at, null);
  await keyStore(ta.ctx).flushLastUsed();
  const after = await db.query<{ last_used_at: Date | null }>(
    "SELECT last_used_at FROM api_keys WHERE id = $1",
    [k.id],
  );
  t.ok(after.rows[0]?.last_used_at instanceof Date);
});

t.test("keys that are not keys never reach the database and get 401", async (t) => {
  const ta = await testApp(t);
  for (const header of [
    "Bearer",
    "Bearer nope",
    "Basic abc",
    "Bearer vgl_short",
    `Bearer vgl_${"A".repeat(32)}`,
  ]) {
    const r = await ta.app.inject({
      method: "GET",
      url: "/v1/connections",
      headers: { authorization: header },
    });
    t.equal(r.statusCode, 401, header);
    t.equal(r.json().error.code, "INVALID_API_KEY");
  }
});

t.test(
  "the limiter's timer survives stores that are not ready yet (the server must not crash at start-up)",
  async (t) => {
    const { RateLimiter } = await import("../../src/ratelimit/limiter.js");
    const { StoreNotReadyError } = await import("../../src/stores/supervisor.js");
    const { createLogger } = await import("../../src/lib/logger.js");
    const unhandled: unknown[] = [];
    const onUnhandled = (err: unknown) => unhandled.push(err);
    process.on("unhandledRejection", onUnhandled);
    t.teardown(() => process.off("unhandledRejection", onUnhandled));
    const limiter = new RateLimiter(
      () => {
        throw new StoreNotReadyError("relational");
      },
      createLogger("silent"),
      { syncMs: 10 },
    );
    t.teardown(() => limiter.close());
    const decision = await limiter.take("user:x", 5);
    t.equal(decision.allowed, true, "counts locally meanwhile");
    await new Promise((r) => setTimeout(r, 100));
    t.same(unhandled, [], "no unhandled rejection from the sync timer");
  },
);

t.test("/mcp counts against the user's hourly budget, shared with the user's personal keys", async (t) => {
  await clearOfHourEnd();
  const ta = await testApp(t);
  const db = ta.ctx.stores.db;
  const user = await createUser(db, { email: "mcp-free@x.example", plan: "free" });
  const key = (await createKey(db, { user: user.id, permissions: [...PERMISSIONS] })).key;
  const token = await mcpTokenFor(ta.app, ta.ctx, user.id);
  const mcp = (id: number) =>
    ta.app.inject({
      method: "POST",
      url: "/mcp",
      headers: {
        authorization: `Bearer ${token}`,
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        "mcp-protocol-version": LATEST_PROTOCOL_VERSION,
      },
      payload: JSON.stringify({ jsonrpc: "2.0", id, method: "tools/list", params: {} }),
    });
  // 60 REST requests with the key, then MCP until the 100 of the free plan are spent
  for (let i = 0; i < 60; i++) t.equal((await call(ta.app, key, "GET", "/v1/connections")).statusCode, 200);
  let last = -1;
  for (let i = 0; i < 40; i++) {
    const r = await mcp(i);
    t.equal(r.statusCode, 200, `tools/list ${i}`);
    t.equal(r.headers["x-ratelimit-limit"], "100");
    last = Number(r.headers["x-ratelimit-remaining"]);
  }
  t.equal(last, 0, "the MCP requests spent what the key left");
  const over = await mcp(99);
  t.equal(over.statusCode, 429);
  const retryAfter = Number(over.headers["retry-after"]);
  t.ok(retryAfter >= 1 && retryAfter <= 3600, `Retry-After ${retryAfter}`);
  t.match(over.json(), {
    jsonrpc: "2.0",
    id: null,
    error: { code: -32000, message: /Rate limit of 100 requests per hour exceeded/ },
  });
  t.equal((await call(ta.app, key, "GET", "/v1/connections")).statusCode, 429, "and the key's too");
});
