import { randomUUID } from "node:crypto";
import type { Tool } from "@modelcontextprotocol/sdk/types.js";
import t from "tap";
import { openIncident, resolveIncident } from "../../src/incidents/incidents.js";
import { availabilitySamples, executions } from "../../src/stores/series/tables.js";
import { testApp } from "../helpers/app.js";
import { call, seedTenants } from "../helpers/tenants.js";
import { callError, callOk, mcpServer } from "./harness.js";

const NAMES = [
  "list_connections",
  "get_connection_health",
  "list_recent_executions",
  "get_gateway_usage",
  "list_anomalies",
  "get_alert_history",
  "get_slo_status",
];
const NOT_ACCESSIBLE = /^Connection \S+ was not found or is not accessible to you\./;

t.test("the tools: schemas, results, bounds, visibility", async (t) => {
  const ta = await testApp(t);
  const w = await seedTenants(ta);
  const { PA, OA, OB, PB, PC } = w.conns;
  const { alice, bob, dave } = w.users;
  const mcp = await mcpServer(t, ta);
  const asAlice = await mcp.client(alice.id);
  const asBob = await mcp.client(bob.id);
  const asDave = await mcp.client(dave.id);
  const now = Date.now();
  const series = ta.ctx.stores.series;

  t.test("tools/list: exactly the spec's tools, read-only, with input and output schemas", async (t) => {
    const { tools } = await asAlice.listTools();
    t.same(tools.map((x) => x.name).sort(), [...NAMES].sort(), "the spec's six and get_slo_status");
    const by = new Map<string, Tool>(tools.map((x) => [x.name, x]));
    for (const tool of tools) {
      t.equal(tool.annotations?.readOnlyHint, true, `${tool.name} is read-only`);
      t.equal(tool.annotations?.destructiveHint, false, `${tool.name} is not destructive`);
      t.ok((tool.description ?? "").length > 80, `${tool.name} has a description to act on`);
      t.equal(tool.inputSchema.type, "object");
      t.equal(tool.outputSchema?.type, "object", `${tool.name} has an output schema`);
    }
    const props = (name: string) =>
      (by.get(name)?.inputSchema.properties ?? {}) as Record<string, Record<string, unknown>>;
    t.same(props("list_connections"), {}, "list_connections takes no parameters");
    t.match(props("get_connection_health"), {
      connection_id: { type: "string" },
      hours: { type: "number", minimum: 1, maximum: 48, default: 24 },
    });
    t.same(by.get("get_connection_health")?.inputSchema.required, ["connection_id"]);
    t.match(props("list_recent_executions"), {
      connection_id: { type: "string" },
      status: { enum: ["success", "error", "running", "waiting", "cancelled"] },
      limit: { type: "integer", minimum: 1, maximum: 100, default: 25 },
    });
    t.notOk(by.get("list_recent_executions")?.inputSchema.required?.length, "nothing required");
    t.match(props("get_gateway_usage"), {
      connection_id: { type: "string" },
      period: { enum: ["day", "week", "month"], default: "day" },
    });
    t.match(props("list_anomalies"), {
      status: { enum: ["open", "resolved"] },
      limit: { type: "integer", minimum: 1, maximum: 100, default: 25 },
    });
    t.match(props("get_alert_history"), {
      limit: { type: "integer", minimum: 1, maximum: 100, default: 25 },
    });
    t.match(by.get("get_connection_health")?.outputSchema?.properties, {
      connection: Object,
      windowHours: Object,
      totalChecks: Object,
      uptimePercent: Object,
      avgResponseTimeMs: Object,
      latestCheck: Object,
      latestFailure: Object,
    });
    t.match(by.get("get_gateway_usage")?.outputSchema?.properties, {
      connection: Object,
      period: Object,
      since: Object,
      totalSpendUsd: Object,
      byModel: Object,
    });
  });

  t.test("list_connections: the user's own and their organizations', nobody else's", async (t) => {
    const a = await callOk<{ connections: Record<string, unknown>[]; total: number; truncated: boolean }>(
      t,
      asAlice,
      "list_connections",
    );
    t.same(a.connections.map((c) => c.id).sort(), [PA, OA].sort());
    t.equal(a.total, 2);
    t.equal(a.truncated, false);
    const pa = a.connections.find((c) => c.id === PA);
    t.same(pa, {
      id: PA,
      name: "alice n8n",
      platform: "workflow_a",
      status: "inactive",
      lastSyncAt: null,
      checkIntervalMinutes: 0.5,
      organization: null,
    });
    t.match(
      a.connections.find((c) => c.id === OA),
      { platform: "workflow_b", organization: { id: w.orgs.orgA.id, name: "Org A" } },
    );
    const b = await callOk<{ connections: Record<string, unknown>[] }>(t, asBob, "list_connections");
    t.same(b.connections.map((c) => c.id).sort(), [OB, PB].sort());
    t.match(
      b.connections.find((c) => c.id === OB),
      { platform: "gateway", checkIntervalMinutes: 1 },
      "a gateway's interval is its heartbeat interval",
    );
    const d = await callOk<{ connections: Record<string, unknown>[] }>(t, asDave, "list_connections");
    t.same(
      d.connections.map((c) => c.id),
      [OA],
      "a plain member sees the organization's, not the owner's personal ones",
    );
    const text = JSON.stringify([a, b, d]);
    for (const secret of w.secrets) t.notOk(text.includes(secret), "no credential leaks");
  });

  t.test("get_connection_health", async (t) => {
    const at = (minutesAgo: number) => new Date(now - minutesAgo * 60_000);
    await series.append(availabilitySamples, [
      {
        ts: at(5),
        connection_id: PA,
        available: true,
        response_time_ms: 100,
        synthetic: false,
        source: "probe",
      },
      {
        ts: at(10),
        connection_id: PA,
        available: false,
        response_time_ms: null,
        reason: "timeout",
        error: "no answer in 10 s",
        synthetic: false,
        source: "probe",
      },
      {
        ts: at(15),
        connection_id: PA,
        available: true,
        response_time_ms: 300,
        synthetic: false,
        source: "probe",
      },
      {
        ts: at(20),
        connection_id: PA,
        available: true,
        response_time_ms: null,
        reason: "not_checked",
        synthetic: true,
        source: "gap_fill",
      },
      // 30 hours ago: only in a window over 30 hours
      {
        ts: at(30 * 60),
        connection_id: PA,
        available: false,
        response_time_ms: 50,
        reason: "http_status",
        error: "HTTP 502",
        synthetic: false,
        source: "probe",
      },
      {
        ts: at(3),
        connection_id: PC,
        available: false,
        response_time_ms: 1,
        synthetic: false,
        source: "probe",
      },
    ]);
    await series.waitVisible();
    const h = await callOk<Record<string, unknown>>(t, asAlice, "get_connection_health", {
      connection_id: PA,
    });
    t.match(h, {
      connection: { id: PA, name: "alice n8n", platform: "workflow_a" },
      windowHours: 24,
      totalChecks: 4,
      availableChecks: 3,
      syntheticChecks: 1,
      uptimePercent: 75,
      avgResponseTimeMs: 200,
      latestCheck: {
        at: at(5).toISOString(),
        available: true,
        responseTimeMs: 100,
        synthetic: false,
        source: "probe",
      },
      latestFailure: {
        at: at(10).toISOString(),
        error: "no answer in 10 s",
        reason: "timeout",
        synthetic: false,
      },
    });
    t.equal(Date.parse(h.until as string) - Date.parse(h.since as string), 24 * 3_600_000);
    const h48 = await callOk<Record<string, unknown>>(t, asAlice, "get_connection_health", {
      connection_id: PA,
      hours: 48,
    });
    t.match(h48, {
      windowHours: 48,
      totalChecks: 5,
      availableChecks: 3,
      uptimePercent: 60,
      avgResponseTimeMs: 150,
    });
    t.match(h48.latestFailure, { error: "no answer in 10 s" }, "the newest failure, not the oldest");
    const short = await callOk<Record<string, unknown>>(t, asAlice, "get_connection_health", {
      connection_id: PA,
      hours: 1.5,
    });
    t.equal(short.windowHours, 1.5, "hours may be fractional");
    const empty = await callOk<Record<string, unknown>>(t, asAlice, "get_connection_health", {
      connection_id: OA,
      hours: 1,
    });
    t.match(empty, {
      totalChecks: 0,
      uptimePercent: null,
      avgResponseTimeMs: null,
      latestCheck: null,
      latestFailure: null,
    });
    const viaDave = await callOk<Record<string, unknown>>(t, asDave, "get_connection_health", {
      connection_id: OA,
    });
    t.match(viaDave, { connection: { id: OA } }, "an organization member reads the organization's");
  });

  t.test("list_recent_executions", async (t) => {
    const ex = (id: string, n: number, status: string, extra: Record<string, unknown> = {}) => ({
      ts: new Date(now - n * 60_000),
      connection_id: id,
      execution_id: `e${n}`,
      workflow_id: "wf1",
      status,
      mode: "trigger",
      stopped_at: new Date(now - n * 60_000 + 500),
      duration_ms: 500,
      updated_at: new Date(now),
      ...extra,
    });
    await series.append(executions, [
      ex(PA, 1, "success"),
      ex(PA, 2, "error", { error: "HTTP 500 from Slack", error_node: "Slack", last_node: "Slack" }),
      ex(OA, 3, "running", { stopped_at: null, duration_ms: null }),
      ex(PA, 4, "cancelled"),
      ex(PC, 5, "error"),
    ]);
    await series.waitVisible();
    const all = await callOk<{ executions: Record<string, unknown>[]; hasMore: boolean }>(
      t,
      asAlice,
      "list_recent_executions",
    );
    t.same(
      all.executions.map((e) => e.executionId),
      ["e1", "e2", "e3", "e4"],
      "newest first, every visible connection, never another tenant's",
    );
    t.equal(all.hasMore, false);
    t.same(all.executions[1], {
      connectionId: PA,
      executionId: "e2",
      workflowId: "wf1",
      workflowName: null,
      status: "error",
      mode: "trigger",
      startedAt: new Date(now - 120_000).toISOString(),
      stoppedAt: new Date(now - 120_000 + 500).toISOString(),
      durationMs: 500,
      error: "HTTP 500 from Slack",
      errorNode: "Slack",
      lastNode: "Slack",
    });
    const errors = await callOk<{ executions: Record<string, unknown>[] }>(
      t,
      asAlice,
      "list_recent_executions",
      {
        status: "error",
      },
    );
    t.same(
      errors.executions.map((e) => e.executionId),
      ["e2"],
    );
    const one = await callOk<{ executions: Record<string, unknown>[]; hasMore: boolean }>(
      t,
      asAlice,
      "list_recent_executions",
      { connection_id: PA, limit: 2 },
    );
    t.same(
      one.executions.map((e) => e.executionId),
      ["e1", "e2"],
    );
    t.equal(one.hasMore, true);
  });

  t.test("list_anomalies", async (t) => {
    const insert = async (
      connection: string,
      minutesAgo: number,
      status = "open",
      metric = "response_time",
    ) => {
      const id = randomUUID();
      await ta.ctx.stores.db.query(
        `INSERT INTO anomalies (id, connection_id, metric, status, detected_at, resolved_at, window_start, window_end, observed,
                                baseline_mean, baseline_stddev, z_score, baseline_median, baseline_mad, band_low, band_high,
                                started_at, ended_at)
         VALUES ($1, $2, $5, $3, now() - make_interval(mins => $4),
                 CASE WHEN $3 = 'resolved' THEN now() ELSE NULL END,
                 now() - interval '2 hours', now() - interval '1 hour', 900, 120, 40, 19.5, 118, 6, 0, 160.5,
                 now() - interval '3 hours', CASE WHEN $3 = 'resolved' THEN now() - interval '1 hour' ELSE NULL END)`,
        [id, connection, status, minutesAgo, metric],
      );
      return id;
    };
    const a1 = await insert(PA, 1);
    const a2 = await insert(OA, 2, "resolved");
    const a3 = await insert(PA, 3, "open", "failure_rate");
    await insert(PC, 1);
    const all = await callOk<{ anomalies: Record<string, unknown>[]; hasMore: boolean }>(
      t,
      asAlice,
      "list_anomalies",
    );
    t.same(
      all.anomalies.map((a) => a.id),
      [a1, a2, a3],
    );
    t.match(all.anomalies[0], {
      id: a1,
      connectionId: PA,
      metric: "response_time",
      status: "open",
      detectedAt: String,
      resolvedAt: null,
      windowStart: String,
      windowEnd: String,
      observed: 900,
      baselineMedian: 118,
      bandLow: 0,
      bandHigh: 160.5,
      baselineMean: 120,
      baselineStddev: 40,
      zScore: 19.5,
      startedAt: String,
      endedAt: null,
    });
    t.match(all.anomalies[1], { status: "resolved", resolvedAt: String, endedAt: String });
    const open = await callOk<{ anomalies: Record<string, unknown>[]; hasMore: boolean }>(
      t,
      asAlice,
      "list_anomalies",
      {
        status: "open",
        limit: 1,
      },
    );
    t.same(
      open.anomalies.map((a) => a.id),
      [a1],
    );
    t.equal(open.hasMore, true);
    const resolved = await callOk<{ anomalies: Record<string, unknown>[] }>(t, asAlice, "list_anomalies", {
      status: "resolved",
    });
    t.same(
      resolved.anomalies.map((a) => a.id),
      [a2],
    );
  });

  t.test("get_slo_status: the figures REST answers, and the alert condition that holds", async (t) => {
    const key = w.keys.alicePersonal;
    const none = await callOk<Record<string, unknown>>(t, asAlice, "get_slo_status", { connection_id: PA });
    t.match(none, { connectionId: PA, objective: null, errorBudget: null, burnRates: null, alert: null });
    // the last hour: a check a minute, the last 10 failed (10 of 60: 16.7x at 99 %, 5 m at 100x)
    const at = Math.floor(Date.now() / 60_000) * 60_000;
    await series.append(
      availabilitySamples,
      Array.from({ length: 60 }, (_, k) => ({
        ts: new Date(at - (60 - k) * 60_000 + 1000),
        connection_id: PA,
        available: k < 50,
        response_time_ms: k < 50 ? 90 : null,
        status_code: k < 50 ? 200 : 503,
        reason: k < 50 ? null : "http_status",
        error: null,
        synthetic: false,
        source: "probe",
      })),
    );
    await series.waitVisible();
    const put = await call(ta.app, key, "PUT", `/v1/connections/${PA}/slo`, {
      objective: 0.99,
      window_days: 30,
    });
    t.equal(put.statusCode, 200);
    const s = await callOk<Record<string, unknown>>(t, asAlice, "get_slo_status", { connection_id: PA });
    const rest = (await call(ta.app, key, "GET", `/v1/connections/${PA}/slo`)).json() as Record<
      string,
      unknown
    >;
    t.same(
      {
        objective: s.objective,
        windowDays: s.windowDays,
        errorBudget: s.errorBudget,
        burnRates: s.burnRates,
      },
      {
        objective: rest.objective,
        windowDays: rest.window_days,
        errorBudget: rest.error_budget,
        burnRates: rest.burn_rates,
      },
      "the same figures as GET /v1/connections/{id}/slo",
    );
    t.match(
      s.alert,
      { severity: "page", longWindow: "1h", shortWindow: "5m", threshold: 14.4 },
      "a fast burn: the page condition holds",
    );
    t.match(
      await callError(asDave, "get_slo_status", { connection_id: PA }),
      NOT_ACCESSIBLE,
      "another user's personal connection is not accessible",
    );
    t.match(await callError(asAlice, "get_slo_status", {}), /connection_id is required/);
    await call(ta.app, key, "DELETE", `/v1/connections/${PA}/slo`);
  });

  t.test("get_alert_history", async (t) => {
    const db = ta.ctx.stores.db;
    const target = (connectionId: string, name: string, userId: string, organizationId: string | null) => ({
      connectionId,
      connectionName: name,
      userId,
      organizationId,
    });
    const pa = target(PA, "alice n8n", alice.id, null);
    const oa = target(OA, "org A make", alice.id, w.orgs.orgA.id);
    const pc = target(PC, "carol n8n", w.users.carol.id, null);
    const base = now - 3_600_000;
    const open = (tg: typeof pa, minutes: number, kind: "availability" | "budget" = "availability") =>
      db.transaction((tx) =>
        openIncident(tx, tg, {
          kind,
          title: `${tg.connectionName} is unavailable`,
          detail: { failures: 3, error: "connect ECONNREFUSED", summary: "spend 120% of budget" },
          at: new Date(base + minutes * 60_000),
          publicUrl: "https://vigil.example",
        }),
      );
    const incident = await open(pa, 0);
    await db.transaction((tx) =>
      resolveIncident(tx, pa, {
        kind: "availability",
        detail: { successes: 2 },
        at: new Date(base + 10 * 60_000),
        publicUrl: "https://vigil.example",
      }),
    );
    await open(oa, 20, "budget");
    await open(pc, 30);
    const h = await callOk<{ alerts: Record<string, unknown>[]; hasMore: boolean }>(
      t,
      asAlice,
      "get_alert_history",
    );
    // The tenants' API keys were made just now: their audits are alerts of the account, newest.
    const audits = h.alerts.filter((a) => a.kind === "audit");
    t.ok(audits.length > 0, "account audits are in the history");
    t.ok(
      audits.every((a) => a.connectionId === null),
      "an API key's audit belongs to the account, not a connection",
    );
    const incidents = h.alerts.filter((a) => a.kind !== "audit");
    t.same(
      incidents.map((a) => [a.kind, a.connectionId]),
      [
        ["budget_warning", OA],
        ["recovery", PA],
        ["failure", PA],
      ],
      "newest first, another tenant's never",
    );
    t.equal(h.hasMore, false);
    t.match(incidents[2], {
      id: String,
      kind: "failure",
      connectionId: PA,
      connectionName: "alice n8n",
      incident: { id: incident, kind: "availability", status: "resolved" },
      subject: "[Vigil] alice n8n is down",
      message: /connect ECONNREFUSED/,
      createdAt: new Date(base).toISOString(),
      recipients: 1,
      delivery: { sent: 0, pending: 1, failed: 0 },
    });
    t.notOk(JSON.stringify(incidents).includes("@"), "recipient addresses are not shown");
    t.ok(
      h.alerts.every((a) => !("recipient" in a)),
      "no alert carries its recipients",
    );
    const d = await callOk<{ alerts: Record<string, unknown>[] }>(t, asDave, "get_alert_history");
    t.same(
      d.alerts.filter((a) => a.kind !== "audit").map((a) => a.connectionId),
      [OA],
      "a member sees the organization's alerts, not the owner's personal ones",
    );
    const one = await callOk<{ alerts: Record<string, unknown>[]; hasMore: boolean }>(
      t,
      asAlice,
      "get_alert_history",
      {
        limit: 1,
      },
    );
    t.equal(one.alerts.length, 1);
    t.equal(one.hasMore, true);
  });

  t.test("get_gateway_usage: only for gateways, the error names the kind", async (t) => {
    const msg = await callError(asAlice, "get_gateway_usage", { connection_id: PA });
    t.match(msg, /workflow_a/);
    t.match(msg, /gateway/);
    const empty = await callOk<Record<string, unknown>>(t, asBob, "get_gateway_usage", { connection_id: OB });
    t.match(empty, {
      connection: { id: OB, name: "org B gateway" },
      period: "day",
      totalSpendUsd: 0,
      byModel: [],
      heartbeats: 0,
    });
  });

  t.test("bad arguments are tool errors that name the problem", async (t) => {
    const cases: [string, Record<string, unknown>, RegExp][] = [
      ["get_connection_health", { connection_id: PA, hours: 0 }, /hours must be from 1 to 48/],
      ["get_connection_health", { connection_id: PA, hours: 49 }, /hours must be from 1 to 48/],
      ["get_connection_health", { connection_id: PA, hours: "24" }, /hours must be a number/],
      ["get_connection_health", {}, /connection_id is required/],
      ["get_connection_health", { connection_id: 42 }, /connection_id must be a string/],
      ["get_connection_health", { connection_id: "" }, /connection_id must not be empty/],
      ["get_connection_health", { connection_id: PA, hourz: 2 }, /hourz/],
      ["list_recent_executions", { limit: 101 }, /limit must be from 1 to 100/],
      ["list_recent_executions", { limit: 0 }, /limit must be from 1 to 100/],
      ["list_recent_executions", { limit: 2.5 }, /limit must be a whole number/],
      [
        "list_recent_executions",
        { status: "failed" },
        /status must be one of success, error, running, waiting, cancelled/,
      ],
      ["list_anomalies", { status: "closed" }, /status must be open or resolved/],
      ["list_anomalies", { limit: 1000 }, /limit must be from 1 to 100/],
      ["get_alert_history", { limit: "10" }, /limit must be a number/],
      ["get_gateway_usage", {}, /connection_id is required/],
      ["get_gateway_usage", { connection_id: OB, period: "year" }, /period must be day, week or month/],
      ["list_connections", { all: true }, /all/],
    ];
    for (const [name, args, message] of cases) {
      const text = await callError(asBob, name, args);
      t.match(text, message, `${name} ${JSON.stringify(args)}: ${text}`);
    }
    t.match(
      await callError(asAlice, "delete_connection", { connection_id: PA }),
      /delete_connection not found/,
    );
  });

  t.test("another tenant's connection: not found or not accessible, whether it exists or not", async (t) => {
    const missing = randomUUID();
    for (const [name, args] of [
      ["get_connection_health", { connection_id: PB }],
      ["get_connection_health", { connection_id: PC }],
      ["get_connection_health", { connection_id: missing }],
      ["list_recent_executions", { connection_id: PB }],
      ["list_recent_executions", { connection_id: missing }],
      ["get_gateway_usage", { connection_id: OB }],
      ["get_gateway_usage", { connection_id: missing }],
    ] as const) {
      const text = await callError(asAlice, name, args);
      t.match(text, NOT_ACCESSIBLE, `${name} ${args.connection_id}`);
      t.ok(text.includes(args.connection_id));
    }
    t.match(
      await callError(asDave, "get_connection_health", { connection_id: PA }),
      NOT_ACCESSIBLE,
      "an organization member cannot read the owner's personal connection",
    );
  });

  t.test("tools never write", async (t) => {
    const before = await call(ta.app, w.keys.alicePersonal, "GET", "/v1/connections");
    for (const name of NAMES)
      await asAlice.callTool({
        name,
        arguments: name === "get_connection_health" ? { connection_id: PA } : {},
      });
    const after = await call(ta.app, w.keys.alicePersonal, "GET", "/v1/connections");
    t.same(after.json(), before.json());
  });
});
