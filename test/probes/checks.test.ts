import http from "node:http";
import net from "node:net";
import t from "tap";
import { platformOrigin, runCheck } from "../../src/probes/platforms.js";
import { createProbeAgent } from "../../src/probes/http.js";
import { startWorkflowA } from "../../src/sim/workflow-a.js";
import { startWorkflowB } from "../../src/sim/workflow-b.js";

const fault = (url: string, f: string, latencyMs = 0) =>
  fetch(`${url}/__sim/state`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ fault: f, latencyMs }),
  });

t.test("workflow_a checks: every failure is a sample with a reason, never an exception", async (t) => {
  const agent = createProbeAgent();
  t.teardown(() => agent.close());
  const sim = await startWorkflowA({ apiKey: "good" });
  t.teardown(() => sim.close());
  const target = {
    serviceType: "workflow_a" as const,
    baseUrl: sim.url,
    apiKey: "good",
    apiToken: null,
    region: null,
  };
  const opts = { timeoutMs: 400, workflowBApiTemplate: "" };
  const check = (over = {}) => runCheck(agent, { ...target, ...over }, opts);

  const up = await check();
  t.match(up, { available: true, statusCode: 200 });
  t.ok((up.responseTimeMs ?? -1) >= 0);
  t.match(await check({ apiKey: "wrong" }), { available: false, reason: "bad_credentials", statusCode: 401 });

  const cases: [string, Record<string, unknown>][] = [
    ["down", { reason: "http_status", statusCode: 503, error: "HTTP 503" }],
    ["hang", { reason: "timeout", responseTimeMs: null }],
    ["redirect", { reason: "redirect", statusCode: 302 }],
    ["huge", { reason: "response_too_large" }],
    ["close", { reason: "connection_reset" }],
    ["bad_credentials", { reason: "bad_credentials" }],
  ];
  const rssBefore = process.memoryUsage().rss;
  for (const [f, expected] of cases) {
    await fault(sim.url, f);
    const started = Date.now();
    const r = await check();
    t.match(r, { available: false, ...expected }, f);
    t.ok(Date.now() - started < 2_000, `${f}: bounded in time`);
  }
  t.ok(process.memoryUsage().rss - rssBefore < 64 * 1024 * 1024, "a 64 MiB answer is not buffered");
  await fault(sim.url, "garbage");
  // garbage on /healthz is still a 200; the API call then fails to parse
  t.match(await check(), { available: false, reason: "invalid_response" });
  await fault(sim.url, "none", 120);
  const slow = await check();
  t.ok(slow.available && (slow.responseTimeMs ?? 0) >= 100, "response time measured");

  const closed = net.createServer();
  await new Promise<void>((r) => closed.listen(0, "127.0.0.1", r));
  const port = (closed.address() as net.AddressInfo).port;
  await new Promise<void>((r) => closed.close(() => r()));
  t.match(await check({ baseUrl: `http://127.0.0.1:${port}` }), {
    available: false,
    reason: "connection_refused",
  });
  t.match(await check({ baseUrl: "http://no-such-host.invalid" }), { available: false, reason: "dns" });
});

t.test("workflow_b checks: regional API address, token", async (t) => {
  const agent = createProbeAgent();
  t.teardown(() => agent.close());
  const sim = await startWorkflowB({ apiToken: "tok" });
  t.teardown(() => sim.close());
  const opts = { timeoutMs: 400, workflowBApiTemplate: `${sim.url}/{region}/api/v2` };
  const target = {
    serviceType: "workflow_b" as const,
    baseUrl: null,
    apiKey: null,
    apiToken: "tok",
    region: "us1",
  };
  t.match(await runCheck(agent, target, opts), { available: true });
  t.match(await runCheck(agent, { ...target, apiToken: "nope" }, opts), {
    available: false,
    reason: "bad_credentials",
  });
  await fault(sim.url, "hang");
  t.match(await runCheck(agent, target, opts), { available: false, reason: "timeout" });
});

t.test("a connection's origin: its n8n host, or its Make region's API host", async (t) => {
  const template = "https://{region}.make.com/api/v2";
  const origin = (serviceType: "workflow_a" | "workflow_b", baseUrl: string | null, region: string | null) =>
    platformOrigin({ serviceType, baseUrl, region }, template);
  t.equal(
    origin("workflow_a", "https://n8n.example.com:8443/sub/path/", null),
    "https://n8n.example.com:8443",
  );
  t.equal(origin("workflow_b", null, "eu2"), "https://eu2.make.com", "every eu2 connection shares one");
  t.equal(origin("workflow_b", null, null), "https://eu1.make.com", "the default region");
  t.equal(origin("workflow_a", "not a url", null), "not a url", "an address that is no URL keys itself");
});

t.test("a syncing check whose list page fails is judged by the small key request", async (t) => {
  const agent = createProbeAgent();
  t.teardown(() => agent.close());
  const asked: string[] = [];
  // an n8n whose execution list is too slow to serve a page of 250 (its database is busy)
  const server = http.createServer((req, res) => {
    asked.push(req.url ?? "");
    const json = (status: number, body: unknown) => {
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify(body));
    };
    if (req.url === "/healthz/readiness") return json(200, { status: "ok" });
    if (req.url === "/api/v1/executions?limit=1") return json(200, { data: [], nextCursor: null });
    return json(500, { message: "Query read timeout" });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  const baseUrl = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
  const out = await runCheck(
    agent,
    { serviceType: "workflow_a", baseUrl, apiKey: "k", apiToken: null, region: null },
    { timeoutMs: 2000, workflowBApiTemplate: "http://unused/{region}", listPage: true },
  );
  t.match(out, { available: true, statusCode: 200 }, "up: the small request answered");
  t.equal(out.page, undefined, "no page for the sync");
  t.same(
    asked,
    ["/api/v1/executions?limit=1", "/api/v1/executions?limit=250"],
    "the key check, then the page",
  );
});
