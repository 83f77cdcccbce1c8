import fs from "node:fs";
import path from "node:path";
import t, { type Test } from "tap";
import { PERMISSIONS } from "../../src/core/actor.js";
import { createKey, createUser } from "../../src/identity/accounts.js";
import { JobRunner } from "../../src/jobs/runner.js";
import { processMetrics, setMetricsSource, watchOutboxes } from "../../src/lib/metrics.js";
import { DeliveryJob } from "../../src/notifications/delivery.js";
import { pendingByChannel } from "../../src/notifications/repository.js";
import { packageRoot } from "../../src/lib/paths.js";
import { ProbeWorker } from "../../src/probes/worker.js";
import { startWorkflowA } from "../../src/sim/workflow-a.js";
import { type TestApp, testApp } from "../helpers/app.js";
import { call } from "../helpers/tenants.js";

/**
 * Vigil's own /metrics (issue #33): what an SRE scraping it checks. The token guards the API
 * port; requests are counted by route template; heartbeats, series rows, checks and job runs
 * move their counters; and the series count stays the same however many connections there are.
 */

const TOKEN = "metrics-token-0123456789abcdef";

/** Every sample line of a scrape: `name{labels}` -> value. */
function samples(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const i = line.lastIndexOf(" ");
    out.set(line.slice(0, i), Number(line.slice(i + 1)));
  }
  return out;
}

const scrape = async (ta: TestApp) => {
  const r = await ta.app.inject({
    method: "GET",
    url: "/metrics",
    headers: { authorization: `Bearer ${TOKEN}` },
  });
  if (r.statusCode !== 200) throw new Error(`scrape: ${r.statusCode} ${r.body}`);
  return r.body;
};

async function owner(ta: TestApp, email: string) {
  const user = await createUser(ta.ctx.stores.db, { email, plan: "enterprise" });
  return (await createKey(ta.ctx.stores.db, { user: user.id, permissions: [...PERMISSIONS] })).key;
}

t.test(
  "GET /metrics on the API port: 404 without METRICS_TOKEN, 401 without the token, text with it",
  async (t: Test) => {
    const off = await testApp(t);
    const r404 = await off.app.inject({ method: "GET", url: "/metrics" });
    t.equal(r404.statusCode, 404);
    t.match(r404.json().error.message, /METRICS_TOKEN/, "the 404 says how to turn it on");

    const ta = await testApp(t, { env: { METRICS_TOKEN: TOKEN } });
    const none = await ta.app.inject({ method: "GET", url: "/metrics" });
    t.equal(none.statusCode, 401);
    t.match(none.headers["www-authenticate"], /Bearer/);
    t.notMatch(none.body, TOKEN, "the answer never echoes the token");
    const wrong = await ta.app.inject({
      method: "GET",
      url: "/metrics",
      headers: { authorization: `Bearer ${TOKEN.slice(0, -1)}x` },
    });
    t.equal(wrong.statusCode, 401, "a wrong token of the same length");
    const short = await ta.app.inject({
      method: "GET",
      url: "/metrics",
      headers: { authorization: "Bearer abc" },
    });
    t.equal(short.statusCode, 401, "a token of another length");
    const ok = await ta.app.inject({
      method: "GET",
      url: "/metrics",
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    t.equal(ok.statusCode, 200);
    t.match(ok.headers["content-type"], /^text\/plain; version=0\.0\.4/);
    for (const name of [
      "vigil_http_request_duration_seconds",
      "vigil_heartbeats_ingested_total",
      "vigil_series_rows_written_total",
      "vigil_probe_checks_total",
      "vigil_probe_schedule_lag_seconds",
      "vigil_store_query_duration_seconds",
      "vigil_outbox_depth",
      "vigil_job_duration_seconds",
      "process_cpu_seconds_total",
    ])
      t.match(ok.body, new RegExp(`^# TYPE ${name} `, "m"), `${name} is exported`);
  },
);

t.test(
  "a scrape whose metrics cannot be gathered (a worker whose primary is silent): 503, not 500",
  async (t: Test) => {
    const ta = await testApp(t, { env: { METRICS_TOKEN: TOKEN } });
    setMetricsSource(() => Promise.reject(new Error("the primary did not answer the metrics request")));
    t.teardown(() => setMetricsSource(processMetrics));
    const r = await ta.app.inject({
      method: "GET",
      url: "/metrics",
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    t.equal(r.statusCode, 503);
    t.equal(r.headers["retry-after"], "5");
    t.equal(r.json().error.code, "SERVICE_UNAVAILABLE");
    setMetricsSource(processMetrics);
    t.equal(
      (await ta.app.inject({ method: "GET", url: "/metrics", headers: { authorization: `Bearer ${TOKEN}` } }))
        .statusCode,
      200,
      "the next scrape answers",
    );
  },
);

t.test("requests are counted by route template, never by the path a caller typed", async (t: Test) => {
  const ta = await testApp(t, { env: { METRICS_TOKEN: TOKEN } });
  const key = await owner(ta, "routes@x.example");
  const ids = ["00000000-0000-4000-8000-000000000001", "00000000-0000-4000-8000-000000000002"];
  const before = samples(await scrape(ta));
  for (const id of ids) await call(ta.app, key, "GET", `/v1/connections/${id}`);
  await ta.app.inject({ method: "GET", url: "/no/such/path/42" });
  const text = await scrape(ta);
  const after = samples(text);
  const series = 'vigil_http_requests_total{route="/v1/connections/:id",method="GET",status_code="404"}';
  t.equal((after.get(series) ?? 0) - (before.get(series) ?? 0), 2, "both ids in one series");
  for (const id of ids) t.notMatch(text, id, "no id in any label");
  t.notMatch(text, "/no/such/path", "an unknown path is not a label either");
  t.ok(
    (after.get('vigil_http_requests_total{route="unmatched",method="GET",status_code="404"}') ?? 0) >= 1,
    "an unknown path is counted as unmatched",
  );
});

t.test("heartbeats, series rows, group commits and store queries move their counters", async (t: Test) => {
  const ta = await testApp(t, { env: { METRICS_TOKEN: TOKEN } });
  const key = await owner(ta, "hb@x.example");
  const gw = await call(ta.app, key, "POST", "/v1/connections", {
    service_type: "gateway",
    service_name: "gw",
  });
  const ingest = gw.json().ingest_api_key as string;
  const before = samples(await scrape(ta));
  const now = Date.now();
  for (let i = 0; i < 3; i++) {
    const r = await call(ta.app, ingest, "POST", "/v1/gateway/ingest", {
      type: "heartbeat",
      gateway: { status: "healthy", latencyMs: 10, version: "1.0.0" },
      tokens: {
        period: {
          inputTokens: 10,
          outputTokens: 1,
          startedAt: new Date(now - (3 - i) * 10_000 - 10_000).toISOString(),
          endedAt: new Date(now - (3 - i) * 10_000).toISOString(),
        },
        byModel: [{ model: "gpt-4o", inputTokens: 10, outputTokens: 1 }],
      },
    });
    t.equal(r.statusCode, 201, r.body);
  }
  const after = samples(await scrape(ta));
  const delta = (s: string) => (after.get(s) ?? 0) - (before.get(s) ?? 0);
  t.equal(delta("vigil_heartbeats_ingested_total"), 3, "three heartbeats");
  t.ok(delta('vigil_series_rows_written_total{store="pglite"}') >= 9, "each heartbeat wrote its rows");
  t.ok(delta('vigil_series_commit_rows_count{store="pglite"}') >= 1, "group commits counted");
  t.ok(delta('vigil_store_query_duration_seconds_count{store="pglite"}') > 0, "relational statements timed");
  t.equal(after.get('vigil_ingest_backlog_rows{store="pglite"}'), 0, "nothing left waiting");
  t.equal(delta('vigil_http_requests_total{route="/v1/gateway/ingest",method="POST",status_code="201"}'), 3);
});

t.test("job runs by outcome", async (t: Test) => {
  const ta = await testApp(t);
  let calls = 0;
  const runner = new JobRunner(ta.ctx, [
    { name: "metrics-test-ok", intervalMs: 60_000, lock: null, run: async () => void calls++ },
    {
      name: "metrics-test-broken",
      intervalMs: 60_000,
      lock: null,
      run: async () => {
        calls++;
        throw new Error("broken on purpose");
      },
    },
  ]);
  runner.start();
  while (calls < 2) await new Promise((r) => setTimeout(r, 10));
  await runner.stop();
  const s = samples((await processMetrics()).toString());
  t.equal(s.get('vigil_job_runs_total{job="metrics-test-ok",outcome="ran"}'), 1);
  t.equal(s.get('vigil_job_runs_total{job="metrics-test-broken",outcome="failed"}'), 1);
  t.equal(s.get('vigil_job_duration_seconds_count{job="metrics-test-ok"}'), 1, "timed");
});

t.test("an incident's e-mail: the outbox depth, then the delivery", async (t: Test) => {
  const ta = await testApp(t, { env: { METRICS_TOKEN: TOKEN } });
  // what `vigil serve` registers for the jobs role
  const unwatch = watchOutboxes(() => pendingByChannel(ta.ctx.stores.db));
  t.teardown(unwatch);
  const key = await owner(ta, "mail@x.example");
  const sim = await startWorkflowA();
  t.teardown(() => sim.close());
  await fetch(`${sim.url}/__sim/state`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ fault: "down" }),
  });
  const r = await call(ta.app, key, "POST", "/v1/connections", {
    service_type: "workflow_a",
    service_name: "failing n8n",
    base_url: sim.url,
    api_key: "sim-api-key",
  });
  const worker = new ProbeWorker(ta.ctx, { timeoutMs: 2_000 });
  t.teardown(() => worker.stop());
  const before = samples(await scrape(ta));
  for (let i = 0; i < 3; i++) {
    await ta.ctx.stores.db.query("UPDATE connections SET next_check_at = now() WHERE id = $1", [
      r.json().connection.id,
    ]);
    await worker.tick();
    await worker.idle();
  }
  const waiting = samples(await scrape(ta));
  t.ok(
    (waiting.get('vigil_outbox_depth{channel="email"}') ?? 0) >= 1,
    "the incident's e-mail waits in the outbox",
  );
  t.equal(
    (waiting.get('vigil_probe_checks_total{kind="workflow_a",outcome="http_status"}') ?? 0) -
      (before.get('vigil_probe_checks_total{kind="workflow_a",outcome="http_status"}') ?? 0),
    3,
    "three failed checks, by reason",
  );
  // the mail server is the outside world: a mailer that accepts
  const sent: string[] = [];
  const job = new DeliveryJob(
    () => ta.ctx.stores.db,
    { send: async (m) => void sent.push(m.to), close() {} },
    ta.ctx.log,
  );
  await job.tick();
  t.ok(sent.length >= 1, "sent");
  const after = samples(await scrape(ta));
  t.equal(
    (after.get('vigil_deliveries_total{channel="email",outcome="delivered"}') ?? 0) -
      (before.get('vigil_deliveries_total{channel="email",outcome="delivered"}') ?? 0),
    sent.length,
    "each delivery counted",
  );
  t.equal(after.get('vigil_outbox_depth{channel="email"}') ?? 0, 0, "the outbox is empty again");
});

t.test("the series count does not grow with connections (checks, lag, requests)", async (t: Test) => {
  const ta = await testApp(t, { env: { METRICS_TOKEN: TOKEN } });
  const key = await owner(ta, "fleet@x.example");
  const sim = await startWorkflowA();
  t.teardown(() => sim.close());
  const worker = new ProbeWorker(ta.ctx, { timeoutMs: 2_000 });
  t.teardown(() => worker.stop());
  const ids: string[] = [];
  const addAndCheck = async (n: number) => {
    for (let i = 0; i < n; i++) {
      const r = await call(ta.app, key, "POST", "/v1/connections", {
        service_type: "workflow_a",
        service_name: `n8n ${ids.length}`,
        base_url: sim.url,
        api_key: "sim-api-key",
      });
      ids.push(r.json().connection.id);
    }
    await ta.ctx.stores.db.query("UPDATE connections SET next_check_at = now()");
    await worker.tick();
    await worker.idle();
    for (const id of ids) await call(ta.app, key, "GET", `/v1/connections/${id}`);
  };
  await addAndCheck(3);
  const first = samples(await scrape(ta));
  t.ok(
    (first.get('vigil_probe_checks_total{kind="workflow_a",outcome="up"}') ?? 0) >= 3,
    "the checks counted",
  );
  await addAndCheck(30);
  const text = await scrape(ta);
  const second = samples(text);
  t.ok(
    (second.get('vigil_probe_checks_total{kind="workflow_a",outcome="up"}') ?? 0) >= 33,
    "the new connections' checks counted",
  );
  const vigilSeries = (m: Map<string, number>) => [...m.keys()].filter((k) => k.startsWith("vigil_")).sort();
  t.same(vigilSeries(second), vigilSeries(first), "the same series with 3 and with 33 connections");
  for (const id of ids) t.notMatch(text, id, "no connection id in any label");
});

t.test("the Grafana dashboard only uses metrics Vigil exports", async (t: Test) => {
  const file = path.join(packageRoot, "docs/grafana/vigil.json");
  const dashboard = JSON.parse(fs.readFileSync(file, "utf8")) as {
    panels: { title: string; targets?: { expr: string }[] }[];
  };
  const exported = new Set(
    [...(await processMetrics()).toString().matchAll(/^# TYPE (\S+) (\S+)/gm)].flatMap(([, name, type]) =>
      type === "histogram"
        ? [`${name}_bucket`, `${name}_sum`, `${name}_count`]
        : type === "summary"
          ? [name, `${name}_sum`, `${name}_count`]
          : [name],
    ),
  );
  const exprs = dashboard.panels.flatMap((p) =>
    (p.targets ?? []).map((x) => ({ panel: p.title, expr: x.expr })),
  );
  t.ok(exprs.length >= 10, `the dashboard has its panels (${exprs.length} expressions)`);
  for (const { panel, expr } of exprs) {
    const names = [...expr.matchAll(/\b((?:vigil|process|nodejs)_[a-z0-9_]+)\b/g)].map((m) => m[1] as string);
    t.ok(names.length > 0, `${panel}: names a metric`);
    for (const n of names) t.ok(exported.has(n), `${panel}: ${n} is exported`);
  }
});
