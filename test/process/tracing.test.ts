import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import t, { type Test } from "tap";
import { freshDatabaseUrl, requireBackend } from "../helpers/backends.js";
import { runAdmin, serveOnFreePort } from "../helpers/process.js";

/**
 * Traces (issue #33): `vigil serve` with OTEL_EXPORTER_OTLP_ENDPOINT exports spans by OTLP/HTTP
 * to a receiver on loopback: the HTTP request with its route, the pg queries under it, and
 * Vigil's own (a group commit after a heartbeat). Without the variable, the OpenTelemetry
 * packages are not even loaded: a module-resolution hook in the child records every
 * `@opentelemetry/` module resolved, and finds none.
 */

interface Span {
  name: string;
  kind: number;
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  attributes?: { key: string; value: { stringValue?: string; intValue?: string | number } }[];
}

/** An OTLP/HTTP receiver (JSON encoding) on loopback, keeping every span and resource it gets. */
async function receiver(t: Test) {
  const spans: Span[] = [];
  const services = new Set<string>();
  let posts = 0;
  const server = http.createServer((req, res) => {
    let body = "";
    req.setEncoding("utf8");
    req.on("data", (c: string) => (body += c));
    req.on("end", () => {
      posts++;
      if (req.method === "POST" && req.url === "/v1/traces") {
        const doc = JSON.parse(body) as {
          resourceSpans?: {
            resource?: { attributes?: Span["attributes"] };
            scopeSpans?: { spans?: Span[] }[];
          }[];
        };
        for (const rs of doc.resourceSpans ?? []) {
          const name = rs.resource?.attributes?.find((a) => a.key === "service.name");
          if (name?.value.stringValue) services.add(name.value.stringValue);
          for (const ss of rs.scopeSpans ?? []) spans.push(...(ss.spans ?? []));
        }
      }
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  const url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  return { url, spans, services, posts: () => posts };
}

const attr = (s: Span, key: string) => {
  const v = s.attributes?.find((a) => a.key === key)?.value;
  return v?.stringValue ?? (v?.intValue === undefined ? undefined : Number(v.intValue));
};

// the pg instrumentation follows the stable database conventions (db.system.name); older ones said db.system
const isPg = (s: Span) => (attr(s, "db.system.name") ?? attr(s, "db.system")) === "postgresql";

/** Waits, up to `ms`, until `found()` holds; false when it never did. */
async function until(found: () => boolean, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (found()) return true;
    await new Promise((r) => setTimeout(r, 100));
  }
  return found();
}

/**
 * A module hook for `--import` in the child: appends to OTEL_RESOLVED_LOG the URL of every
 * module resolved under @opentelemetry/, so a test can tell whether the SDK was loaded at all.
 */
function resolveRecorder(dir: string): string {
  const hooks = path.join(dir, "hooks.mjs");
  fs.writeFileSync(
    hooks,
    `import fs from "node:fs";
export async function resolve(specifier, context, next) {
  const r = await next(specifier, context);
  if (r.url.includes("/@opentelemetry/")) fs.appendFileSync(process.env.OTEL_RESOLVED_LOG, r.url + "\\n");
  return r;
}
`,
  );
  const register = path.join(dir, "register.mjs");
  fs.writeFileSync(
    register,
    `import { register } from "node:module";\nregister(${JSON.stringify(new URL(`file://${hooks}`).href)});\n`,
  );
  return register;
}

async function setUp(t: Test) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "vigil-tracing-"));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const env = {
    DATABASE_URL: await freshDatabaseUrl(t),
    VIGIL_SECRET: "tracing-test-secret-tracing-test-secret",
    LOG_LEVEL: "debug",
  };
  const user = await runAdmin(t, env, "create-user", "--email", "traces@x.example", "--plan", "enterprise");
  const { key } = await runAdmin(t, env, "create-key", "--user", user.id as string);
  const resolved = path.join(dir, "resolved.log");
  const hooks = { NODE_OPTIONS: `--import=${resolveRecorder(dir)}`, OTEL_RESOLVED_LOG: resolved };
  const loadedOtel = () => (fs.existsSync(resolved) ? fs.readFileSync(resolved, "utf8") : "");
  return { env, key: key as string, hooks, loadedOtel };
}

/** Creates a gateway connection (a request that writes to PostgreSQL) and sends it a heartbeat. */
async function traffic(url: string, key: string) {
  const created = await fetch(`${url}/v1/connections`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ service_type: "gateway", service_name: "gw-traced" }),
  });
  const { connection, ingest_api_key } = (await created.json()) as {
    connection: { id: string };
    ingest_api_key: string;
  };
  const hb = await fetch(`${url}/v1/gateway/ingest`, {
    method: "POST",
    headers: { authorization: `Bearer ${ingest_api_key}`, "content-type": "application/json" },
    body: JSON.stringify({ type: "heartbeat", gateway: { status: "healthy", latencyMs: 3, version: "1" } }),
  });
  const healthz = await fetch(`${url}/healthz`);
  return {
    created: created.status,
    heartbeat: hb.status,
    healthz: healthz.status,
    connection: connection.id,
  };
}

t.test("OTEL_EXPORTER_OTLP_ENDPOINT set: HTTP, pg and Vigil's own spans reach the collector", async (t) => {
  if (!(await requireBackend(t, "postgres"))) return;
  const otlp = await receiver(t);
  const { env, key, hooks, loadedOtel } = await setUp(t);
  const vigil = await serveOnFreePort(t, {
    ...env,
    ...hooks,
    OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
    OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
    OTEL_BSP_SCHEDULE_DELAY: "200",
  });
  await vigil.waitFor(/series store ready/, 60_000);
  t.match(vigil.output(), /"endpoint":"http:\/\/127\.0\.0\.1:\d+"[^\n]*tracing on/, "logged at start");
  const sent = await traffic(vigil.url, key);
  t.same([sent.created, sent.heartbeat, sent.healthz], [201, 201, 200]);

  const route = (s: Span) => attr(s, "http.route");
  const serverSpan = () =>
    otlp.spans.find(
      (s) => s.kind === 2 && route(s) === "/v1/connections" && attr(s, "http.request.method") === "POST",
    );
  const commit = () => otlp.spans.find((s) => s.name === "vigil.series.commit");
  t.ok(await until(() => serverSpan() !== undefined && commit() !== undefined, 30_000), "the spans arrived");
  const http = serverSpan() as Span;
  t.equal(http.name, "POST /v1/connections", "the HTTP server span is named by its route");
  const inRequest = otlp.spans.filter((s) => s.traceId === http.traceId);
  const pgSpans = inRequest.filter(isPg);
  t.ok(pgSpans.length > 0, "pg queries of the request, in its trace");
  t.ok(
    pgSpans.every((s) => !JSON.stringify(s).includes(key)),
    "no credential in the pg spans",
  );

  const c = commit() as Span;
  t.equal(attr(c, "vigil.series.store"), "postgres");
  t.equal(attr(c, "vigil.series.rows"), 2, "the heartbeat's rows: the heartbeat and its availability sample");
  t.equal(c.parentSpanId || undefined, undefined, "a group commit is a trace of its own");
  t.ok(
    otlp.spans.some((s) => s.traceId === c.traceId && s.parentSpanId === c.spanId && isPg(s)),
    "its INSERT under it",
  );
  t.notOk(
    otlp.spans.some((s) => route(s) === "/healthz" || (attr(s, "url.path") ?? "") === "/healthz"),
    "health checks are not traced",
  );
  t.same([...otlp.services], ["vigil"], "service.name defaults to vigil");
  t.match(loadedOtel(), /@opentelemetry\/sdk-node/, "the recorder sees the SDK when it is loaded");

  // a probe check: a platform that refuses connections is checked within a scheduler tick
  const wf = (await (
    await fetch(`${vigil.url}/v1/connections`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({
        service_type: "workflow_a",
        service_name: "wf-traced",
        base_url: "http://127.0.0.1:1",
        api_key: "traced-platform-key",
      }),
    })
  ).json()) as { connection: { id: string } };
  const check = () =>
    otlp.spans.find(
      (s) => s.name === "vigil.probe.check" && attr(s, "vigil.connection.id") === wf.connection.id,
    );
  t.ok(await until(() => check() !== undefined, 30_000), "the check's span arrived");
  const checked = check() as Span;
  t.equal(attr(checked, "vigil.connection.kind"), "workflow_a");
  t.equal(attr(checked, "vigil.check.outcome"), "connection_refused");
  t.ok(
    otlp.spans.some((s) => s.parentSpanId === checked.spanId && s.kind === 3),
    "its request to the platform (undici) under it",
  );
  t.notOk(JSON.stringify(otlp.spans).includes("traced-platform-key"), "no platform credential in any span");
  const outbound = otlp.spans.find((s) => s.parentSpanId === checked.spanId && s.kind === 3) as Span;
  t.equal(attr(outbound, "url.full"), "http://127.0.0.1:1", "an outbound span records the origin only");

  // a path or query that may carry a secret: an invitation's token, an OAuth code
  const token = "inv0tat10nT0ken-abcdefghijklmnop";
  await fetch(`${vigil.url}/invitations/${token}`);
  await fetch(`${vigil.url}/v1/connections?code=oauth-code-123456789`, {
    headers: { authorization: `Bearer ${key}` },
  });
  t.ok(
    await until(() => otlp.spans.some((s) => s.name.includes("/invitations/")), 15_000),
    "the invitation page's spans arrived",
  );
  const all = JSON.stringify(otlp.spans);
  t.notOk(all.includes(token), "no invitation token in any span");
  t.notOk(all.includes("oauth-code-123456789"), "no query string in any span");

  // spans still buffered at SIGTERM are exported before the process leaves
  const before = otlp.spans.length;
  await traffic(vigil.url, key);
  vigil.proc.kill("SIGTERM");
  t.equal((await vigil.exited(30_000)).code, 0);
  t.ok(otlp.spans.length > before, "flushed at shutdown");
});

t.test("OTEL_EXPORTER_OTLP_ENDPOINT unset: tracing off, the SDK never loaded", async (t) => {
  if (!(await requireBackend(t, "postgres"))) return;
  const otlp = await receiver(t);
  const { env, key, hooks, loadedOtel } = await setUp(t);
  // the other OTEL_* variables alone turn nothing on
  const vigil = await serveOnFreePort(t, {
    ...env,
    ...hooks,
    OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
    OTEL_SERVICE_NAME: "vigil-off",
  });
  await vigil.waitFor(/series store ready/, 60_000);
  t.match(vigil.output(), /tracing off: OTEL_EXPORTER_OTLP_ENDPOINT is unset/);
  const sent = await traffic(vigil.url, key);
  t.same([sent.created, sent.heartbeat], [201, 201]);
  vigil.proc.kill("SIGTERM");
  t.equal((await vigil.exited(30_000)).code, 0);
  t.equal(loadedOtel(), "", "no @opentelemetry module was resolved");
  t.equal(otlp.posts(), 0);
});

t.test("OTEL_SDK_DISABLED=true wins over the endpoint", async (t) => {
  if (!(await requireBackend(t, "postgres"))) return;
  const otlp = await receiver(t);
  const { env, key, hooks, loadedOtel } = await setUp(t);
  const vigil = await serveOnFreePort(t, {
    ...env,
    ...hooks,
    OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
    OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
    OTEL_SDK_DISABLED: "true",
  });
  await vigil.waitFor(/series store ready/, 60_000);
  t.match(vigil.output(), /tracing off: OTEL_SDK_DISABLED=true/);
  await traffic(vigil.url, key);
  vigil.proc.kill("SIGTERM");
  t.equal((await vigil.exited(30_000)).code, 0);
  t.equal(loadedOtel(), "", "no @opentelemetry module was resolved");
  t.equal(otlp.posts(), 0, "nothing exported");
});
