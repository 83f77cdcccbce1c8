import type { IncomingMessage, ServerResponse } from "node:http";
import t, { type Test } from "tap";
import { createKey, createUser } from "../../src/identity/accounts.js";
import { PERMISSIONS } from "../../src/core/actor.js";
import { checkTarget, probePolicy, type Resolver } from "../../src/lib/outbound.js";
import { createProbeAgent, probeHttp } from "../../src/probes/http.js";
import { SYNC_BUDGET } from "../../src/probes/platform.js";
import { runCheck } from "../../src/probes/platforms.js";
import { ProbeWorker } from "../../src/probes/worker.js";
import { syncWorkflowA } from "../../src/probes/workflow-a.js";
import { syncWorkflowB } from "../../src/probes/workflow-b.js";
import { availabilitySamples } from "../../src/stores/series/tables.js";
import { type TestApp, testApp } from "../helpers/app.js";
import { call } from "../helpers/tenants.js";
import { canListen, endless, silent, target } from "./fixtures/servers.js";

/**
 * Outbound safety of probes and platform syncs (issue #16, point 4), against real servers on
 * loopback: PROBE_DENY_PRIVATE off lets a probe reach them, on refuses them with the reason, by
 * literal address and by every DNS answer at connect time; redirects are never followed; bodies
 * are cut at their bound and every request ends within its deadline.
 */

/** A minimal n8n: readiness, and a one-run execution list for the right key. */
const n8n = (req: IncomingMessage, res: ServerResponse) => {
  if (req.url?.startsWith("/healthz")) return res.end('{"status":"ok"}');
  if (req.headers["x-n8n-api-key"] !== "k") {
    res.statusCode = 401;
    return res.end('{"message":"unauthorized"}');
  }
  res.setHeader("content-type", "application/json");
  res.end('{"data":[],"nextCursor":null}');
};

const check = (agent: ReturnType<typeof createProbeAgent>, baseUrl: string, timeoutMs = 1000) =>
  runCheck(
    agent,
    { serviceType: "workflow_a", baseUrl, apiKey: "k", apiToken: null, region: null },
    { timeoutMs, workflowBApiTemplate: "" },
  );

const agentFor = (t: Test, opts: Parameters<typeof createProbeAgent>[0]) => {
  const agent = createProbeAgent(opts);
  t.teardown(() => agent.close());
  return agent;
};

/** A resolver with fixed answers (a name resolving into loopback without touching real DNS). */
const zone =
  (answers: Record<string, string[] | (() => string[])>): Resolver =>
  (host, _opts, cb) => {
    const a = answers[host];
    const list = typeof a === "function" ? a() : a;
    if (!list)
      return cb(Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: "ENOTFOUND" }), []);
    cb(
      null,
      list.map((address) => ({ address, family: address.includes(":") ? 6 : 4 })),
    );
  };

t.test("a loopback target: reached by default, refused with PROBE_DENY_PRIVATE=true", async (t) => {
  const srv = await target(t, n8n);
  const open = agentFor(t, { denyPrivate: false });
  const closed = agentFor(t, { denyPrivate: true });

  t.match(await check(open, srv.url), { available: true, statusCode: 200 }, "allowed by default");
  const hits = srv.state.hits;
  t.equal(hits, 1, "the API alone: readiness is asked only when the API fails");

  const refused = await check(closed, srv.url);
  t.match(refused, {
    available: false,
    reason: "refused",
    error: "refused: 127.0.0.1 is a loopback address (PROBE_DENY_PRIVATE=true)",
  });
  t.equal(srv.state.hits, hits, "the target never saw a request");

  const v6mapped = await check(closed, `http://[::ffff:127.0.0.1]:${srv.port}`);
  t.match(v6mapped, { reason: "refused", error: /::ffff:7f00:1 is a loopback address/ }, "IPv4-mapped");
  t.match(
    await check(closed, `http://0.0.0.0:${srv.port}`),
    { reason: "refused", error: /0\.0\.0\.0 is an unspecified address/ },
    "0.0.0.0 (which connects to this host)",
  );
  t.match(
    await check(closed, `http://2130706433:${srv.port}`),
    { reason: "refused", error: /127\.0\.0\.1 is a loopback/ },
    "decimal IPv4",
  );
  t.equal(srv.state.hits, hits);
});

t.test("a name resolving into a refused range is refused at connect time", async (t) => {
  const srv = await target(t, n8n);
  const port = srv.port;

  // the system resolver: localhost resolves to loopback
  const closed = agentFor(t, { denyPrivate: true });
  t.match(await check(closed, `http://localhost:${port}`), {
    available: false,
    reason: "refused",
    error:
      /^refused: localhost resolves to (127\.0\.0\.1|::1), a loopback address \(PROBE_DENY_PRIVATE=true\)$/,
  });

  // a customer's name that resolves to loopback (a resolver of the test's own)
  const resolve = zone({
    "n8n.customer.test": ["127.0.0.1"],
    "dual.customer.test": ["93.184.216.34", "127.0.0.1"],
  });
  const openNamed = agentFor(t, { denyPrivate: false, resolve });
  const closedNamed = agentFor(t, { denyPrivate: true, resolve });
  t.match(
    await check(openNamed, `http://n8n.customer.test:${port}`),
    { available: true },
    "allowed by default",
  );
  const before = srv.state.hits;
  t.match(await check(closedNamed, `http://n8n.customer.test:${port}`), {
    reason: "refused",
    error: "refused: n8n.customer.test resolves to 127.0.0.1, a loopback address (PROBE_DENY_PRIVATE=true)",
  });
  t.match(
    await check(closedNamed, `http://dual.customer.test:${port}`),
    { reason: "refused", error: /dual\.customer\.test resolves to 127\.0\.0\.1/ },
    "one loopback answer among public ones refuses the name",
  );
  t.equal(srv.state.hits, before, "no request reached the target");

  // DNS rebinding: public when the connection is stored, loopback when the probe connects
  let answers = 0;
  const rebinding = zone({ "rebind.test": () => (answers++ === 0 ? ["93.184.216.34"] : ["127.0.0.1"]) });
  t.equal(
    await checkTarget(`http://rebind.test:${port}`, probePolicy(true), { resolve: rebinding }),
    null,
    "passes the check at create time",
  );
  const rebound = agentFor(t, { denyPrivate: true, resolve: rebinding });
  t.match(await check(rebound, `http://rebind.test:${port}`), {
    reason: "refused",
    error: /rebind\.test resolves to 127\.0\.0\.1, a loopback address/,
  });
  t.equal(srv.state.hits, before, "and is refused when connecting");
});

t.test("platform syncs go through the same agent: nothing reaches a refused platform", async (t) => {
  const srv = await target(t, n8n);
  const closed = agentFor(t, { denyPrivate: true });
  const limits = { now: new Date(), deadline: Date.now() + 5_000 };
  const a = await syncWorkflowA(
    closed,
    { baseUrl: srv.url, apiKey: "k" },
    {},
    SYNC_BUDGET,
    500,
    new Set(),
    limits,
  );
  t.same(a.runs, []);
  const b = await syncWorkflowB(
    closed,
    { api: `${srv.url}/api/v2`, apiToken: "tok", teamId: "1" },
    {},
    SYNC_BUDGET,
    500,
    limits,
  );
  t.equal(b.stoppedBy, "refused", "workflow_b: the tick ends, no scenario is blamed");
  t.equal(srv.state.hits, 0);
});

t.test("redirects are never followed, from an allowed target into a refused one", async (t) => {
  if (!(await canListen("127.0.0.2"))) {
    t.comment("skipped: 127.0.0.2 is not a loopback address here");
    return;
  }
  const inside = await target(t, n8n, "127.0.0.2");
  const outside = await target(t, (_req, res) => {
    res.writeHead(302, { location: `${inside.url}/healthz/readiness` });
    res.end();
  });
  // 127.0.0.1 stands for an allowed (public) platform; 127.0.0.2 is refused as loopback
  const agent = agentFor(t, { denyPrivate: true, exempt: ["127.0.0.1"] });
  t.match(await check(agent, inside.url), { reason: "refused", error: /127\.0\.0\.2 is a loopback address/ });
  const r = await check(agent, outside.url);
  t.match(r, {
    available: false,
    reason: "redirect",
    statusCode: 302,
    error: new RegExp(
      `^HTTP 302 redirect to ${inside.url}/healthz/readiness \\(redirects are not followed\\)$`,
    ),
  });
  t.equal(outside.state.hits, 2, "the API, then readiness: both redirected");
  t.equal(inside.state.hits, 0, "the refused target was never contacted");

  const open = agentFor(t, { denyPrivate: false });
  t.match(await check(open, outside.url), { reason: "redirect" }, "not followed by default either");
  t.equal(inside.state.hits, 0);
});

t.test("an endless body is cut at its bound, and the probe ends in time", async (t) => {
  const chunk = Buffer.alloc(64 * 1024, "x");
  const srv = await target(t, (req, res) => {
    if (req.url === "/error") return endless(res, chunk, 500);
    if (req.url === "/api/v1/executions?limit=1") return endless(res, chunk);
    if (req.url?.startsWith("/healthz") && req.headers["x-test"] !== "ok") return endless(res, chunk);
    res.end('{"status":"ok"}');
  });
  const agent = agentFor(t, { denyPrivate: false });
  const rss = process.memoryUsage().rss;

  let started = Date.now();
  const health = await check(agent, srv.url, 5_000);
  t.match(health, {
    available: false,
    reason: "response_too_large",
    error: "response larger than 65536 bytes",
  });
  t.ok(Date.now() - started < 2_000, `a health check reads at most 64 KiB (${Date.now() - started} ms)`);

  started = Date.now();
  const big = await probeHttp(agent, `${srv.url}/api/v1/executions?limit=1`, {
    timeoutMs: 5_000,
    json: true,
    maxBytes: 1024 * 1024,
  });
  t.match(big, { ok: false, reason: "response_too_large", error: "response larger than 1048576 bytes" });
  t.ok(Date.now() - started < 2_000, "an API read stops at its bound");

  started = Date.now();
  const err = await probeHttp(agent, `${srv.url}/error`, { timeoutMs: 5_000 });
  t.match(err, { ok: false, reason: "http_status", status: 500 }, "an error status with an endless page");
  t.ok(Date.now() - started < 2_000, "its body is drained a few KB at most");

  await new Promise((r) => setTimeout(r, 50));
  t.equal(srv.state.closed, srv.state.hits, "every endless answer was cut off (its connection closed)");
  t.ok(process.memoryUsage().rss - rss < 64 * 1024 * 1024, "nothing near the bodies' size was buffered");
});

t.test("a body that drips forever ends at the deadline, not at the bound", async (t) => {
  const srv = await target(t, (_req, res) => {
    res.writeHead(200, { "content-type": "text/plain" });
    const timer = setInterval(() => res.write("."), 20);
    res.on("close", () => clearInterval(timer));
  });
  const agent = agentFor(t, { denyPrivate: false });
  const started = Date.now();
  const r = await probeHttp(agent, srv.url, { timeoutMs: 300 });
  const took = Date.now() - started;
  t.match(r, { ok: false, reason: "timeout" });
  t.ok(took >= 250 && took < 1_500, `bounded by the overall deadline (${took} ms)`);
});

/** An app and its probe worker; PROBE_TIMEOUT_MS and PROBE_DENY_PRIVATE from `env`. */
async function prober(t: Test, env: Record<string, string>, sameStoresAs?: TestApp) {
  const ta = await testApp(t, { env, sameStoresAs });
  const worker = new ProbeWorker(ta.ctx); // no timeout given: PROBE_TIMEOUT_MS
  t.teardown(() => worker.stop());
  return { ta, worker };
}

async function owner(ta: TestApp) {
  const user = await createUser(ta.ctx.stores.db, { email: `o${Date.now()}@x.example`, plan: "enterprise" });
  return (await createKey(ta.ctx.stores.db, { user: user.id, permissions: [...PERMISSIONS] })).key;
}

/** Makes the connection due, lets the worker check it; the check's sample and how long the slot took. */
async function slot(ta: TestApp, worker: ProbeWorker, id: string) {
  await ta.ctx.stores.db.query("UPDATE connections SET next_check_at = now() WHERE id = $1", [id]);
  const started = Date.now();
  await worker.tick();
  await worker.idle();
  const ms = Date.now() - started;
  const samples = await ta.ctx.stores.series.page(availabilitySamples, {
    where: [{ column: "connection_id", op: "eq", value: id }],
    limit: 100,
  });
  return { ms, sample: samples.rows.find((r) => r.source === "probe") }; // newest first
}

t.test("through the API and the probe worker", async (t) => {
  // one set of stores (a PGlite start is the slow part), apps with different settings on it
  const open = await prober(t, { PROBE_DENY_PRIVATE: "false" });
  const key = await owner(open.ta);

  t.test(
    "PROBE_DENY_PRIVATE=true: a 400 naming base_url at create and update, a refused check otherwise",
    async (t) => {
      const srv = await target(t, n8n);
      const closed = await prober(t, { PROBE_DENY_PRIVATE: "true" }, open.ta);
      const body = { service_type: "workflow_a", service_name: "n8n", base_url: srv.url, api_key: "k" };
      const post = (over: Record<string, unknown>) =>
        call(closed.ta.app, key, "POST", "/v1/connections", { ...body, ...over });

      for (const base_url of [
        srv.url,
        `http://localhost:${srv.port}`,
        "http://10.0.0.5:5678",
        "http://[fe80::1]/",
      ]) {
        const r = await post({ base_url });
        t.equal(r.statusCode, 400, base_url);
        t.match(r.json().error, /^base_url: refused: .+ \(PROBE_DENY_PRIVATE=true\)$/, base_url);
      }
      t.equal(
        (await post({ base_url: "http://169.254.169.254/" })).json().error,
        "base_url: refused: 169.254.169.254 is a cloud metadata address (PROBE_DENY_PRIVATE=true)",
      );
      t.equal(
        (await post({ service_type: "gateway", api_key: undefined })).statusCode,
        201,
        "a gateway's base_url is never contacted: not judged",
      );

      // stored while allowed (or before the setting was turned on): the check is refused
      const created = await call(open.ta.app, key, "POST", "/v1/connections", body);
      t.equal(created.statusCode, 201, "allowed by default");
      const id = created.json().connection.id as string;
      const put = await call(closed.ta.app, key, "PUT", `/v1/connections/${id}`, {
        base_url: "http://192.168.1.10/",
      });
      t.equal(put.statusCode, 400);
      t.equal(
        put.json().error,
        "base_url: refused: 192.168.1.10 is a private address (PROBE_DENY_PRIVATE=true)",
      );

      const allowed = await slot(open.ta, open.worker, id);
      t.match(allowed.sample, { available: true }, "checked while allowed");
      const hits = srv.state.hits;
      const refused = await slot(closed.ta, closed.worker, id);
      t.match(refused.sample, {
        available: false,
        reason: "refused",
        error: "refused: 127.0.0.1 is a loopback address (PROBE_DENY_PRIVATE=true)",
      });
      t.equal(srv.state.hits, hits, "the refused check sent nothing");
    },
  );

  t.test("a target that never answers times out at PROBE_TIMEOUT_MS", async (t) => {
    const hang = await silent(t);
    const { ta, worker } = await prober(t, { PROBE_TIMEOUT_MS: "300" }, open.ta);
    const r = await call(ta.app, key, "POST", "/v1/connections", {
      service_type: "workflow_a",
      service_name: "hangs",
      base_url: hang.url,
      api_key: "k",
    });
    const { ms, sample } = await slot(ta, worker, r.json().connection.id as string);
    t.match(sample, { available: false, reason: "timeout" });
    // (undici opens a fresh connection to the origin once the timed-out one is destroyed, a few
    // ms after the check ends: what counts is that the check connected and was not refused)
    t.ok(hang.state.connections >= 1, "it connected, then heard nothing");
    t.ok(ms >= 280 && ms < 2_000, `the check took PROBE_TIMEOUT_MS, not the 10 s default (${ms} ms)`);
  });
});
