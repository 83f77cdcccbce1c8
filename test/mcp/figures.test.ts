import t from "tap";
import { availabilitySamples } from "../../src/stores/series/tables.js";
import { testApp } from "../helpers/app.js";
import { type BackendName, requireBackend } from "../helpers/backends.js";
import { call, seedTenants } from "../helpers/tenants.js";
import { callOk, mcpServer } from "./harness.js";

/**
 * The tool server's figures agree with REST on every backend: get_connection_health over 24 h
 * with /v1/availability/summary?window=day and the samples of /v1/availability;
 * get_gateway_usage with PUT /v1/usage (heartbeat dollars and entry cents reconciled).
 */
const BACKENDS: { name: BackendName; opts: Parameters<typeof testApp>[1] }[] = [
  { name: "pglite", opts: {} },
  { name: "postgres", opts: { relational: "postgres" } },
  { name: "questdb", opts: { series: "questdb" } },
];

const close = (a: unknown, b: unknown) =>
  typeof a === "number" && typeof b === "number" && Math.abs(a - b) < 1e-9;

interface Health {
  since: string;
  until: string;
  totalChecks: number;
  availableChecks: number;
  syntheticChecks: number;
  uptimePercent: number | null;
  avgResponseTimeMs: number | null;
  latestCheck: { at: string; available: boolean; responseTimeMs: number | null } | null;
  latestFailure: { at: string; error: string } | null;
}
interface Usage {
  since: string;
  until: string;
  totalSpendUsd: number;
  totalSpendCents: number;
  byModel: { model: string; inputTokens: number; outputTokens: number; spendUsd: number; requests: number }[];
  heartbeats: number;
  totalRequests: number;
  inputTokens: number;
  outputTokens: number;
  unitemizedSpendUsd: number;
  usageEntriesSpendUsd: number;
  unpricedModels: string[];
}

for (const backend of BACKENDS) {
  t.test(`figures agree with REST on ${backend.name}`, async (t) => {
    if (!(await requireBackend(t, backend.name))) return;
    const ta = await testApp(t, backend.opts);
    const w = await seedTenants(ta);
    const { OB, PB } = w.conns;
    const key = w.keys.bobPersonal;
    const fixed = new Date(Math.floor(Date.now() / 1000) * 1000);
    ta.ctx.now = () => fixed;
    const ago = (minutes: number) => new Date(fixed.getTime() - minutes * 60_000).toISOString();

    // a gateway's heartbeats through the real ingest path
    const heartbeat = async (minutesAgo: number, body: Record<string, unknown>) => {
      const { tokens, system, status, ...rest } = body as {
        tokens?: Record<string, unknown>;
        system?: Record<string, unknown>;
        status?: string;
      };
      const r = await call(ta.app, w.keys.ingest, "POST", "/v1/gateway/ingest", {
        type: "heartbeat",
        gateway: { status: status ?? "healthy", latencyMs: 40 + minutesAgo, version: "1.4.0" },
        ...(system ? { system } : {}),
        tokens: {
          ...tokens,
          period: {
            inputTokens: 0,
            outputTokens: 0,
            requestCount: 0,
            ...(tokens?.period as Record<string, unknown>),
            startedAt: ago(minutesAgo + 1),
            endedAt: ago(minutesAgo),
          },
        },
        ...rest,
      });
      t.equal(r.statusCode, 201, r.body);
    };
    const hb1 = {
      tokens: {
        period: { inputTokens: 6000, outputTokens: 1200, requestCount: 7 },
        byModel: [
          { model: "claude-sonnet-4-5", inputTokens: 1000, outputTokens: 200, estimatedCostUsd: 0.0123 },
          { model: "gpt-4o", inputTokens: 5000, outputTokens: 1000 }, // priced: $2.50 and $10 per Mtok
        ],
      },
    };
    await heartbeat(1, hb1);
    await heartbeat(1, hb1); // a resend counts once
    await heartbeat(2, {
      tokens: {
        period: { inputTokens: 100, outputTokens: 10, requestCount: 2, estimatedCostUsd: 0.5 },
        byModel: [{ model: "mystery-model", inputTokens: 100, outputTokens: 10 }], // unpriced
      },
    });
    await heartbeat(3, {
      status: "degraded",
      tokens: { period: { inputTokens: 10, outputTokens: 0, requestCount: 1, estimatedCostUsd: 0.25 } },
    });
    await heartbeat(4, { system: { gatewayPidAlive: false } });
    // two days ago: counts in the week and the month, adds no sample
    await heartbeat(2 * 24 * 60 + 5, {
      tokens: {
        period: { inputTokens: 1000, outputTokens: 100, requestCount: 10 },
        byModel: [{ model: "claude-sonnet-4-5", inputTokens: 1000, outputTokens: 100, estimatedCostUsd: 1 }],
      },
    });
    const entry = await call(ta.app, key, "POST", "/v1/usage", {
      connection_id: OB,
      entity: "gpt-4o",
      usage_amount: 300,
      cost_cents: 12.5,
    });
    t.equal(entry.statusCode, 201, entry.body);

    // a workflow connection's probe samples, gap-fill and failures among them
    const sample = (minutesAgo: number, available: boolean, extra: Record<string, unknown> = {}) => ({
      ts: new Date(fixed.getTime() - minutesAgo * 60_000),
      connection_id: PB,
      available,
      response_time_ms: available ? 100 + minutesAgo : null,
      synthetic: false,
      source: "probe",
      ...(available ? {} : { reason: "timeout", error: `no answer (${minutesAgo} min ago)` }),
      ...extra,
    });
    await ta.ctx.stores.series.append(availabilitySamples, [
      ...[5, 10, 15, 20, 25, 30, 60, 120].map((m) => sample(m, true)),
      sample(7, false),
      sample(45, false),
      sample(50, true, {
        synthetic: true,
        source: "gap_fill",
        reason: "not_checked",
        response_time_ms: null,
      }),
      sample(55, true, {
        synthetic: true,
        source: "gap_fill",
        reason: "not_checked",
        response_time_ms: null,
      }),
      sample(24 * 60 - 1, false),
      sample(24 * 60 + 1, false), // just outside a day
      sample(30 * 60, true),
    ]);
    await ta.ctx.stores.series.waitVisible();

    const mcp = await mcpServer(t, ta);
    const bob = await mcp.client(w.users.bob.id);

    for (const [name, id] of [
      ["gateway", OB],
      ["workflow_a", PB],
    ] as const) {
      const health = await callOk<Health>(t, bob, "get_connection_health", { connection_id: id, hours: 24 });
      const summary = await call(
        ta.app,
        key,
        "GET",
        `/v1/availability/summary?window=day&connection_id=${id}`,
      );
      t.equal(summary.statusCode, 200, summary.body);
      const [row] = summary.json().data;
      t.ok(row, `${name}: the summary has a row`);
      t.same(
        {
          since: health.since,
          until: health.until,
          checks: health.totalChecks,
          available_checks: health.availableChecks,
          uptime_percent: health.uptimePercent,
          avg_response_time_ms: health.avgResponseTimeMs,
        },
        {
          since: row.since,
          until: row.until,
          checks: row.checks,
          available_checks: row.available_checks,
          uptime_percent: row.uptime_percent,
          avg_response_time_ms: row.avg_response_time_ms,
        },
        `${name}: health over 24 h equals /v1/availability/summary?window=day`,
      );
      const samples = await call(
        ta.app,
        key,
        "GET",
        `/v1/availability?connection_id=${id}&since=${health.since}&until=${health.until}&limit=1000`,
      );
      const rows = samples.json().data as {
        checked_at: string;
        available: boolean;
        response_time_ms: number | null;
        error: string | null;
        reason: string | null;
        synthetic: boolean;
      }[];
      t.equal(rows.length, health.totalChecks, `${name}: one check per sample`);
      t.equal(rows.filter((r) => r.synthetic).length, health.syntheticChecks, `${name}: synthetic samples`);
      t.equal(rows.filter((r) => r.available).length, health.availableChecks);
      t.same(
        health.latestCheck && {
          at: health.latestCheck.at,
          available: health.latestCheck.available,
          responseTimeMs: health.latestCheck.responseTimeMs,
        },
        rows[0] && {
          at: rows[0].checked_at,
          available: rows[0].available,
          responseTimeMs: rows[0].response_time_ms,
        },
        `${name}: the latest check is the newest sample`,
      );
      const failure = rows.find((r) => !r.available);
      t.same(
        health.latestFailure && { at: health.latestFailure.at, error: health.latestFailure.error },
        failure && { at: failure.checked_at, error: failure.error ?? failure.reason },
        `${name}: the latest failure is the newest unavailable sample`,
      );
    }
    const pb = await callOk<Health>(t, bob, "get_connection_health", { connection_id: PB });
    t.match(pb, {
      totalChecks: 13,
      availableChecks: 10,
      syntheticChecks: 2,
      uptimePercent: 76.923,
      latestFailure: { at: ago(7), error: "no answer (7 min ago)" },
    });
    const ob = await callOk<Health>(t, bob, "get_connection_health", { connection_id: OB });
    t.match(ob, {
      totalChecks: 4,
      availableChecks: 2,
      uptimePercent: 50,
      latestCheck: { at: ago(1), available: true },
    });
    t.match(ob.latestFailure, { at: ago(3), error: "gateway status degraded" });

    // gateway usage: the month is PUT /v1/usage's default range; any period equals PUT over its window
    const month = await callOk<Usage>(t, bob, "get_gateway_usage", { connection_id: OB, period: "month" });
    const totals = await call(ta.app, key, "PUT", `/v1/usage?connection_id=${OB}`);
    t.equal(totals.statusCode, 200, totals.body);
    const rest = totals.json();
    t.equal(month.since, rest.start_date);
    t.equal(month.until, rest.end_date);
    for (const [period, restBody] of [
      ["month", rest],
      [
        "day",
        (
          await call(
            ta.app,
            key,
            "PUT",
            `/v1/usage?connection_id=${OB}&start_date=${ago(24 * 60)}&end_date=${fixed.toISOString()}`,
          )
        ).json(),
      ],
      [
        "week",
        (
          await call(
            ta.app,
            key,
            "PUT",
            `/v1/usage?connection_id=${OB}&start_date=${ago(7 * 24 * 60)}&end_date=${fixed.toISOString()}`,
          )
        ).json(),
      ],
    ] as const) {
      const u =
        period === "month"
          ? month
          : await callOk<Usage>(t, bob, "get_gateway_usage", { connection_id: OB, period });
      t.equal(u.since, restBody.start_date, `${period}: same window`);
      t.equal(
        u.totalSpendUsd,
        restBody.totals.cost_usd,
        `${period}: totalSpendUsd is PUT /v1/usage's cost_usd`,
      );
      t.equal(u.totalSpendCents, restBody.totals.cost_cents, `${period}: and its cents`);
      t.ok(close(u.totalSpendUsd * 100, restBody.totals.cost_cents), `${period}: dollars are cents / 100`);
      t.equal(u.heartbeats, restBody.gateway.heartbeats);
      t.equal(u.totalRequests, restBody.gateway.requests);
      t.equal(u.inputTokens, restBody.gateway.input_tokens);
      t.equal(u.outputTokens, restBody.gateway.output_tokens);
      t.same(u.unpricedModels, restBody.unpriced_models);
      t.same(
        u.byModel.map((m) => [m.model, m.inputTokens, m.outputTokens]).sort(),
        restBody.gateway.by_model
          .map((m: { model: string; input_tokens: number; output_tokens: number }) => [
            m.model,
            m.input_tokens,
            m.output_tokens,
          ])
          .sort(),
        `${period}: the same models and tokens`,
      );
      for (const m of restBody.gateway.by_model as { model: string; cost_cents: number }[])
        t.ok(
          close(u.byModel.find((x) => x.model === m.model)?.spendUsd, m.cost_cents / 100),
          `${period}: ${m.model} spend in dollars`,
        );
      t.ok(
        close(
          u.byModel.reduce((s, m) => s + m.spendUsd, 0) + u.unitemizedSpendUsd + u.usageEntriesSpendUsd,
          u.totalSpendUsd,
        ),
        `${period}: models + unitemized + entries = total`,
      );
      t.equal(
        u.byModel.reduce((s, m) => s + m.requests, 0),
        u.totalRequests,
        `${period}: every request attributed to a model`,
      );
    }
    const day = await callOk<Usage>(t, bob, "get_gateway_usage", { connection_id: OB });
    t.ok(close(day.totalSpendUsd, 0.0123 + 0.0225 + 0.5 + 0.25 + 0.125), `day total ${day.totalSpendUsd}`);
    t.ok(close(month.totalSpendUsd, day.totalSpendUsd + 1), `month total ${month.totalSpendUsd}`);
    t.ok(
      close(day.unitemizedSpendUsd, 0.75),
      "period estimates beyond their models, and a heartbeat without models",
    );
    t.ok(close(day.usageEntriesSpendUsd, 0.125), "the usage entry's 12.5 cents");
    t.match(day, {
      heartbeats: 4,
      totalRequests: 10,
      inputTokens: 6110,
      outputTokens: 1210,
      unpricedModels: ["mystery-model"],
    });
    t.same(
      day.byModel.map((m) => [m.model, m.inputTokens, m.outputTokens]),
      [
        ["gpt-4o", 5000, 1000],
        ["claude-sonnet-4-5", 1000, 200],
        ["mystery-model", 100, 10],
      ],
      "highest spend first",
    );
    t.ok(close(day.byModel[0]?.spendUsd, 0.0225), "gpt-4o priced from the pricing table");
    t.match(
      month.byModel.find((m) => m.model === "claude-sonnet-4-5"),
      { inputTokens: 2000, outputTokens: 300 },
    );
  });
}
