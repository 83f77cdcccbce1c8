import net from "node:net";
import { brotliDecompressSync, gunzipSync } from "node:zlib";
import t, { type Test } from "tap";
import { buildApp } from "../../src/app.js";
import { loadConfig } from "../../src/config.js";
import { recordStatus } from "../../src/connections/status.js";
import { closeContext, createContext } from "../../src/core/context.js";
import { openIncident } from "../../src/incidents/incidents.js";
import { createLogger } from "../../src/lib/logger.js";
import { CHECK_MS, entryFor } from "../../src/status-pages/cache.js";
import { migrate } from "../../src/stores/relational/migrate.js";
import { createPgStore } from "../../src/stores/relational/pg.js";
import { createSqlSeriesStore } from "../../src/stores/series/sql.js";
import { availabilitySamples } from "../../src/stores/series/tables.js";
import { StoreSupervisor } from "../../src/stores/supervisor.js";
import { type TestApp, testApp } from "../helpers/app.js";
import { freshDatabaseUrl, requireBackend } from "../helpers/backends.js";
import { call, seedTenants } from "../helpers/tenants.js";

/**
 * The public cache (src/status-pages/cache.ts) as a visitor and an operator see it:
 *  (a) a change made through one process (a post) or by the probes (a status, an incident) shows
 *      on every process's page within the check interval, CHECK_MS;
 *  (b) with PostgreSQL unreachable, a page built before keeps answering 200 with its last good
 *      content, marked `x-vigil-stale: true`; a page never built answers 503 with Retry-After; the
 *      mark goes once the store is back;
 *  (c) concurrent first visitors cause one build, and visitors of a built page no statement;
 *  (d) made-up slugs cost no statement each: one reload of the map of slugs per 2 s at most;
 *  (e) ETags answer 304 for the page, the feed, the summary and the badges; gzip and brotli when
 *      asked, the same content once decompressed;
 *  (f) badge URLs a visitor makes up (any key, any kind) are 404s the cache does not keep.
 * Statements are counted where PostgreSQL receives them: a TCP proxy in front of it reads the
 * protocol's Parse, Bind and Query messages (and can be cut, so no server is stopped).
 */

const MIN = 60_000;
/** How often cache.ts reloads its map of slugs for a visitor asking for one not in it (not exported). */
const UNKNOWN_RELOAD_MS = 2_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Statement {
  sql: string;
  params: string[];
}

/**
 * A TCP proxy in front of PostgreSQL that records every statement its clients execute (the SQL of
 * each Bind, or of a simple Query, with the parameters as text) and can be cut (every connection
 * dropped, new ones refused) and restored.
 */
async function statementProxy(target: URL) {
  const statements: Statement[] = [];
  const sockets = new Set<net.Socket>();
  let up = true;
  const server = net.createServer((client) => {
    if (!up) return client.destroy();
    const upstream = net.connect(Number(target.port || 5432), target.hostname);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on("close", () => sockets.delete(s));
      s.on("error", () => {
        client.destroy();
        upstream.destroy();
      });
    }
    let buf = Buffer.alloc(0);
    let startup = true;
    const named = new Map<string, string>();
    const cstring = (b: Buffer, at: number): [string, number] => {
      const end = b.indexOf(0, at);
      return [b.toString("utf8", at, end), end + 1];
    };
    client.on("data", (d: Buffer) => {
      upstream.write(d);
      buf = Buffer.concat([buf, d]);
      for (;;) {
        if (startup) {
          // untyped: length, then a code (an SSL or GSS request is followed by the real startup)
          if (buf.length < 8) return;
          const len = buf.readInt32BE(0);
          if (buf.length < len) return;
          const code = buf.readInt32BE(4);
          startup = code === 80877103 || code === 80877104;
          buf = buf.subarray(len);
          continue;
        }
        if (buf.length < 5) return;
        const len = buf.readInt32BE(1);
        if (buf.length < len + 1) return;
        const type = String.fromCharCode(buf[0] ?? 0);
        const body = buf.subarray(5, len + 1);
        buf = buf.subarray(len + 1);
        if (type === "P") {
          const [name, at] = cstring(body, 0);
          named.set(name, cstring(body, at)[0]);
        } else if (type === "Q") statements.push({ sql: cstring(body, 0)[0], params: [] });
        else if (type === "B") {
          const [, portalEnd] = cstring(body, 0);
          const [stmt, stmtEnd] = cstring(body, portalEnd);
          let at = stmtEnd;
          const formats = body.readInt16BE(at);
          at += 2 + 2 * formats;
          const n = body.readInt16BE(at);
          at += 2;
          const params: string[] = [];
          for (let i = 0; i < n; i++) {
            const l = body.readInt32BE(at);
            at += 4;
            params.push(l < 0 ? "" : body.toString("utf8", at, at + l));
            if (l > 0) at += l;
          }
          statements.push({ sql: named.get(stmt) ?? "", params });
        }
      }
    });
    client.on("end", () => upstream.end());
    upstream.pipe(client);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    port: (server.address() as net.AddressInfo).port,
    statements,
    cut() {
      up = false;
      for (const s of sockets) s.destroy();
    },
    restore() {
      up = true;
    },
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

/** The statement that compares a page's fingerprint (repository.ts selectFingerprint): every refresh and every build starts with it. */
const isFingerprint = (s: Statement) => s.sql.includes("string_agg(sc.key");
/** The statement that reads the page itself (selectPublicPage): once per build. */
const isBuild = (s: Statement) => s.sql.includes("octet_length(p.logo)") && s.sql.includes("p.slug = $1");

/** The real app on a fresh PostgreSQL database reached through a statement proxy. */
async function proxiedApp(t: Test) {
  const direct = new URL(await freshDatabaseUrl(t));
  const proxy = await statementProxy(direct);
  t.teardown(() => proxy.close());
  const via = new URL(direct);
  via.port = String(proxy.port);
  const db = createPgStore({ connectionString: via.toString(), max: 4 });
  t.teardown(() => db.close());
  await migrate(db);
  const config = loadConfig({
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? "silent",
    VIGIL_SECRET: "cache-test-secret-cache-test-secret-0123",
  });
  const log = createLogger(config.logLevel);
  const stores = StoreSupervisor.ready({ db, series: createSqlSeriesStore(db) }, log, config);
  const ctx = createContext(config, log, stores);
  t.teardown(() => closeContext(ctx));
  const app = await buildApp(ctx);
  t.teardown(() => app.close());
  return { ta: { app, ctx } as TestApp, proxy };
}

const get = (ta: TestApp, url: string, headers: Record<string, string> = {}) =>
  ta.app.inject({ method: "GET", url, headers });

/** A page of alice's over PA, with two posts (so its feed is worth compressing). */
async function alicePage(ta: TestApp, alice: string, connectionId: string, slug: string) {
  const res = await call(ta.app, alice, "POST", "/v1/status-pages", {
    slug,
    title: `${slug} title`,
    description: "What our customers rely on, checked every minute.",
    show_response_times: true,
    groups: [
      { name: "Automation", components: [{ connection_id: connectionId, display_name: "Workflows" }] },
    ],
  });
  if (res.statusCode !== 201) throw new Error(`page: ${res.statusCode} ${res.body}`);
  const page = res.json() as { id: string; groups: { components: { key: string }[] }[] };
  for (const [title, status] of [
    ["Slow workflow runs", "resolved"],
    ["Webhook delivery delayed", "monitoring"],
  ]) {
    const post = await call(ta.app, alice, "POST", `/v1/status-pages/${page.id}/incidents`, {
      title,
      status,
      message:
        "A queue of incoming webhooks is backed up behind a slow consumer; we are draining it and watching.",
    });
    if (post.statusCode !== 201) throw new Error(`post: ${post.statusCode} ${post.body}`);
  }
  return { id: page.id, key: page.groups[0]?.components[0]?.key ?? "" };
}

/** Polls `read` until `done` holds or `ms` pass; the value last read and when it held (ms after start). */
async function until<T>(read: () => Promise<T>, done: (v: T) => boolean, ms: number) {
  const start = Date.now();
  for (;;) {
    const v = await read();
    if (done(v)) return { value: v, after: Date.now() - start };
    if (Date.now() - start > ms) return { value: v, after: null };
    await sleep(200);
  }
}

for (const backend of ["pglite", "postgres"] as const) {
  t.test(
    `every process shows a change within the check interval; ETags and encodings (${backend})`,
    async (t) => {
      if (!(await requireBackend(t, backend))) return;
      const a = await testApp(t, { relational: backend });
      const b = await testApp(t, { sameStoresAs: a });
      const w = await seedTenants(a);
      const alice = w.keys.alicePersonal;
      const PA = w.conns.PA;
      await a.ctx.stores.series.append(
        availabilitySamples,
        [1, 2, 3].map((n) => ({
          ts: new Date(a.ctx.now().getTime() - n * MIN),
          connection_id: PA,
          available: true,
          response_time_ms: 120,
          status_code: 200,
          reason: null,
          error: null,
          synthetic: false,
          source: "probe",
        })),
      );
      await a.ctx.stores.series.waitVisible();
      await recordStatus(a.ctx.stores.db, PA, { type: "check_succeeded" }, a.ctx.now());
      const { id: pageId, key } = await alicePage(a, alice, PA, "alice-live");
      const url = "/status/alice-live";

      await t.test("(a) a post made through one process", async (t) => {
        t.equal((await get(b, url)).statusCode, 200, "the second process builds its snapshot");
        const posted = Date.now();
        const res = await call(a.app, alice, "POST", `/v1/status-pages/${pageId}/incidents`, {
          title: "Database failover",
          status: "investigating",
          message: "Writes fail for some accounts.",
        });
        t.equal(res.statusCode, 201);
        t.match(
          (await get(a, url)).body,
          "Database failover",
          "the process it was made through shows it at once",
        );
        t.notMatch(
          (await get(b, url)).body,
          "Database failover",
          "the other still serves its snapshot first",
        );
        const seen = await until(
          async () => (await get(b, url)).body,
          (body) => body.includes("Database failover"),
          CHECK_MS + 5_000,
        );
        t.ok(seen.after !== null, "the other process shows it");
        t.ok(
          Date.now() - posted <= CHECK_MS + 3_000,
          `within the check interval (${CHECK_MS} ms) and a little: ${Date.now() - posted} ms`,
        );
      });

      await t.test("(a) a status change and an incident, as the probes write them", async (t) => {
        const summary = (ta: TestApp) => async () =>
          (await get(ta, `${url}/summary.json`)).json() as {
            status: { indicator: string };
            components: { status: string }[];
          };
        t.equal((await summary(a)()).components[0]?.status, "operational");
        t.equal((await summary(b)()).components[0]?.status, "operational");
        const changed = Date.now();
        const at = a.ctx.now();
        await a.ctx.stores.db.transaction(async (tx) => {
          await recordStatus(
            tx,
            PA,
            { type: "check_failed", badCredentials: false, failures: 3, threshold: 3 },
            at,
          );
          await openIncident(
            tx,
            { connectionId: PA, connectionName: "alice n8n", userId: w.users.alice.id, organizationId: null },
            {
              kind: "availability",
              title: "alice n8n is unavailable",
              detail: { failures: 3 },
              at,
              publicUrl: "",
            },
          );
        });
        const down = (s: { status: { indicator: string }; components: { status: string }[] }) =>
          s.components[0]?.status === "major_outage" && s.status.indicator === "critical";
        const [seenA, seenB] = await Promise.all([
          until(summary(a), down, CHECK_MS + 5_000),
          until(summary(b), down, CHECK_MS + 5_000),
        ]);
        t.ok(seenA.after !== null && seenB.after !== null, "both processes show the outage");
        t.ok(
          Date.now() - changed <= CHECK_MS + 3_000,
          `within the check interval and a little: ${Date.now() - changed} ms`,
        );
        const badge = await get(b, `${url}/badge/${key}/status.json`);
        t.match(badge.json(), { message: "Major outage" }, "the status badge too");
      });

      await t.test("(e) ETags: 304 for the page, feed, summary and badges", async (t) => {
        for (const path of [
          "",
          "/feed.atom",
          "/summary.json",
          "/badge.svg",
          "/badge.json",
          `/badge/${key}/status.svg`,
          `/badge/${key}/uptime-24h.json`,
        ]) {
          const first = await get(a, `${url}${path}`);
          t.equal(first.statusCode, 200, `${path || "/"}: 200`);
          const etag = String(first.headers.etag ?? "");
          t.match(etag, /^"[^"]+"$/, `${path || "/"}: a strong ETag`);
          t.match(first.headers["cache-control"], /public, max-age=\d+/);
          for (const inm of [etag, `W/${etag}`, `"other", ${etag}`]) {
            const again = await get(a, `${url}${path}`, { "if-none-match": inm });
            t.equal(again.statusCode, 304, `${path || "/"}: If-None-Match ${inm} is a 304`);
            t.equal(again.body, "", "without a body");
            t.equal(again.headers.etag, etag, "with the same ETag");
          }
          t.equal(
            (await get(a, `${url}${path}`, { "if-none-match": '"other"' })).statusCode,
            200,
            "another is a 200",
          );
        }
      });

      await t.test("(e) gzip and brotli when asked, the same content", async (t) => {
        for (const path of ["", "/feed.atom", "/summary.json", "/badge.svg", `/badge/${key}/uptime-7d.svg`]) {
          const plain = await get(a, `${url}${path}`);
          t.equal(plain.headers["content-encoding"], undefined, `${path || "/"}: identity unless asked`);
          t.equal(plain.headers.vary, "Accept-Encoding");
          const big = plain.rawPayload.length >= 1024;
          for (const [ask, enc] of [
            ["gzip", "gzip"],
            ["br", "br"],
            ["gzip, deflate, br", "br"],
          ] as const) {
            const res = await get(a, `${url}${path}`, { "accept-encoding": ask });
            t.equal(res.statusCode, 200);
            if (!big) {
              t.equal(
                res.headers["content-encoding"],
                undefined,
                `${path}: ${plain.rawPayload.length} bytes, sent as it is`,
              );
              t.same(res.rawPayload, plain.rawPayload);
              continue;
            }
            t.equal(res.headers["content-encoding"], enc, `${path || "/"}: Accept-Encoding ${ask} → ${enc}`);
            const body = enc === "br" ? brotliDecompressSync(res.rawPayload) : gunzipSync(res.rawPayload);
            t.ok(body.equals(plain.rawPayload), `${path || "/"}: the same bytes once decompressed`);
            t.ok(res.rawPayload.length < plain.rawPayload.length, "and fewer of them");
          }
        }
        for (const path of ["", "/feed.atom", "/summary.json"])
          t.ok(
            (await get(a, `${url}${path}`)).rawPayload.length >= 1024,
            `${path || "/"} is big enough to compress`,
          );
      });
    },
  );
}

t.test("store down, first visitors, unknown slugs: what PostgreSQL sees (postgres)", async (t) => {
  if (!(await requireBackend(t, "postgres"))) return;
  const { ta, proxy } = await proxiedApp(t);
  const w = await seedTenants(ta);
  const alice = w.keys.alicePersonal;
  const PA = w.conns.PA;
  await recordStatus(ta.ctx.stores.db, PA, { type: "check_succeeded" }, ta.ctx.now());
  const cold = await alicePage(ta, alice, PA, "cold-page");
  const stale = await alicePage(ta, alice, PA, "stale-page");
  await alicePage(ta, alice, PA, "never-built");
  const since = (mark: number) => proxy.statements.slice(mark);

  await t.test("(c) 50 concurrent first visitors: one build; then no statement per visitor", async (t) => {
    const mark = proxy.statements.length;
    const started = Date.now();
    const answers = await Promise.all(Array.from({ length: 50 }, () => get(ta, "/status/cold-page")));
    t.same([...new Set(answers.map((r) => r.statusCode))], [200], "all 50 answer 200");
    t.equal(new Set(answers.map((r) => r.headers.etag)).size, 1, "the same page");
    const first = since(mark);
    t.equal(first.filter(isBuild).length, 1, "one build", {
      statements: first.map((s) => s.sql.slice(0, 80)),
    });
    t.ok(
      first.filter(isFingerprint).length <= (Date.now() - started < CHECK_MS ? 1 : 2),
      "one fingerprint read",
    );

    const warm = proxy.statements.length;
    const warmStart = Date.now();
    const paths = ["", "/feed.atom", "/summary.json", "/badge.svg", `/badge/${cold.key}/status.svg`];
    for (let i = 0; i < 40; i++)
      for (const r of await Promise.all(paths.map((p) => get(ta, `/status/cold-page${p}`))))
        if (r.statusCode !== 200) t.fail(`a warm visit answered ${r.statusCode}`);
    const elapsed = Date.now() - warmStart;
    const visits = since(warm);
    t.equal(visits.filter(isBuild).length, 0, "200 more visits: no build");
    t.ok(
      visits.filter(isFingerprint).length <= Math.floor(elapsed / CHECK_MS),
      `at most one fingerprint read per ${CHECK_MS} ms (${elapsed} ms)`,
    );
    t.ok(visits.length <= 1 + 2 * Math.floor(elapsed / CHECK_MS), "and hardly any statement at all", {
      statements: visits.map((s) => s.sql.slice(0, 80)),
    });
  });

  await t.test(
    "(d) unknown slugs: no statement each, one reload of the slug map per 2 s at most",
    async (t) => {
      const fingerprints = (mark: number) => since(mark).filter((s) => isFingerprint(s)).length;
      const reloads = (mark: number) =>
        since(mark).filter((s) => /FROM status_pages"?\s*$/i.test(s.sql.trim())).length;
      await sleep(UNKNOWN_RELOAD_MS + 100);
      const mark = proxy.statements.length;
      const concurrent = await Promise.all([
        ...Array.from({ length: 50 }, (_, i) => get(ta, `/status/no-such-page-${i}`)),
        ...Array.from({ length: 25 }, (_, i) => get(ta, `/status/made-up-${i}`)),
        ...Array.from({ length: 25 }, (_, i) => get(ta, `/status/made-up-${i}/summary.json`)),
      ]);
      t.same([...new Set(concurrent.map((r) => r.statusCode))], [404], "100 requests, 75 made-up slugs: 404");
      t.equal(fingerprints(mark), 0, "no page lookup for a slug that does not exist");
      t.equal(reloads(mark), 1, "one reload of the slug map for all of them");
      const next = proxy.statements.length;
      const soon = await Promise.all(Array.from({ length: 20 }, (_, i) => get(ta, `/status/soon-${i}`)));
      t.same([...new Set(soon.map((r) => r.statusCode))], [404], "20 more at once, right after: 404");
      t.equal(reloads(next), 1, "they wait for the next reload, 2 s after the last: one more");

      // a page created through this process answers at once at a slug asked for before
      const made = await alicePage(ta, alice, PA, "no-such-page-1");
      t.ok(made.id);
      t.equal((await get(ta, "/status/no-such-page-1")).statusCode, 200, "a new page at once");
    },
  );

  await t.test(
    "(b) PostgreSQL unreachable: the last good page, marked stale; 503 when never built",
    async (t) => {
      const paths = [
        "",
        "/feed.atom",
        "/summary.json",
        "/badge.svg",
        "/badge.json",
        `/badge/${stale.key}/status.svg`,
        `/badge/${stale.key}/uptime-24h.json`,
      ];
      const good = new Map<string, { body: string; etag: unknown }>();
      for (const p of paths) {
        const r = await get(ta, `/status/stale-page${p}`);
        t.equal(r.statusCode, 200);
        t.equal(r.headers["x-vigil-stale"], undefined, `${p || "/"}: fresh`);
        good.set(p, { body: r.body, etag: r.headers.etag });
      }
      const builtAt = Date.now();

      proxy.cut();
      await sleep(Math.max(0, builtAt + CHECK_MS + 100 - Date.now()));
      // the visit after the check interval starts a refresh in the background; it fails
      const marked = await until(
        () => get(ta, "/status/stale-page"),
        (r) => r.headers["x-vigil-stale"] === "true",
        5_000,
      );
      t.ok(marked.after !== null, "the next refresh attempt fails: the page is marked stale");
      for (const p of paths) {
        const r = await get(ta, `/status/stale-page${p}`);
        t.equal(r.statusCode, 200, `${p || "/"}: 200 while the store is down`);
        t.equal(r.headers["x-vigil-stale"], "true", `${p || "/"}: x-vigil-stale: true`);
        t.equal(r.body, good.get(p)?.body, `${p || "/"}: the last good content`);
        t.equal(r.headers.etag, good.get(p)?.etag, "its ETag");
      }
      const cond = await get(ta, "/status/stale-page", { "if-none-match": String(good.get("")?.etag) });
      t.equal(cond.statusCode, 304, "a conditional request still gets its 304");

      for (const [p, json] of [
        ["", false],
        ["/summary.json", true],
        ["/badge.svg", false],
      ] as const) {
        const r = await get(ta, `/status/never-built${p}`);
        t.equal(r.statusCode, 503, `a page never built: ${p || "/"} 503`);
        t.ok(Number(r.headers["retry-after"]) > 0, "with Retry-After");
        t.equal(r.headers["cache-control"], "no-store", "not to be cached");
        if (json) t.match(r.json(), { error: { code: "SERVICE_UNAVAILABLE" } });
        t.notMatch(r.body, /127\.0\.0\.1|ECONN|terminated|postgres/i, "naming no address or driver error");
      }

      proxy.restore();
      const back = await until(
        () => get(ta, "/status/stale-page"),
        (r) => r.statusCode === 200 && r.headers["x-vigil-stale"] === undefined,
        CHECK_MS + 5_000,
      );
      t.ok(back.after !== null, "once the store is back, the stale mark goes at the next check");
      for (const p of paths) {
        const r = await get(ta, `/status/stale-page${p}`);
        t.equal(r.headers["x-vigil-stale"], undefined, `${p || "/"}: not stale`);
      }
      t.equal((await get(ta, "/status/never-built")).statusCode, 200, "and the page never built is built");
    },
  );
});

t.test("(f) made-up badge URLs are answered 404 and not kept", async (t) => {
  const ta = await testApp(t);
  const w = await seedTenants(ta);
  const { key } = await alicePage(ta, w.keys.alicePersonal, w.conns.PA, "alice-badges");
  t.equal((await get(ta, `/status/alice-badges/badge/${key}/status.svg`)).statusCode, 200);
  const entry = async () => {
    const e = await entryFor(ta.ctx, "alice-badges");
    if (!e) throw new Error("no entry");
    return e;
  };
  const before = (await entry()).renders.size;
  // each URL's key or kind is new (up to Fastify's 100 characters a path parameter): a cache
  // keyed by them keeps every one until the next rebuild, a minute later
  const made = 300;
  const long = "k".repeat(90);
  for (let i = 0; i < made; i++) {
    for (const path of [`/badge/${long}${i}/status.svg`, `/badge/${key}/nope${i}.json`]) {
      const r = await get(ta, `/status/alice-badges${path}`);
      if (r.statusCode !== 404) t.fail(`${path.slice(0, 40)}… answered ${r.statusCode}`);
    }
  }
  const e = await entry();
  const kept = [...e.renders.keys()].filter((k) => k.includes("nope") || k.includes(long));
  t.ok(
    e.renders.size - before <= 2,
    `${2 * made} made-up badge URLs: the entry keeps ${e.renders.size - before} more renderings ` +
      `(${kept.reduce((n, k) => n + k.length, 0)} bytes of keys)`,
  );
});
