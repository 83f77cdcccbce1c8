import { gunzipSync } from "node:zlib";
import { Sender } from "@questdb/nodejs-client";
import Fastify, { type FastifyInstance } from "fastify";
import type pg from "pg";
import { decodeMetricsRequest } from "../../src/otlp/decode.js";

/**
 * The *minimal pipeline* of `bench ingest` (issue #17, point 1): the fastest way to store what a
 * heartbeat carries, to measure Vigil's heartbeat ingest against. A bare Fastify route parses the
 * same bodies and writes the same information to tables of the same schema as Vigil's
 * (`gateway_heartbeats`, one `gateway_model_usage` row per model, one `availability_samples`
 * row) with the official `@questdb/nodejs-client` sender over HTTP, and answers each request only
 * after the flush that carried its rows was committed: requests that arrive while a flush is under
 * way wait for the next one, as Vigil's group commit does. No authentication, no validation, no
 * dedupe, no pricing: what is left is parsing, encoding and QuestDB.
 *
 * The gateway is named by its key (each key its own connection id, as in Vigil).
 */
export async function minimalPipeline(
  pool: pg.Pool,
  questdbHttpUrl: string,
  prefix: string,
): Promise<{ app: FastifyInstance; url: string; close(): Promise<void> }> {
  const names = {
    heartbeats: `${prefix}mp_gateway_heartbeats`,
    models: `${prefix}mp_gateway_model_usage`,
    samples: `${prefix}mp_availability_samples`,
  };
  // the same schema (columns, partitioning, WAL, dedup keys) as Vigil's own tables
  for (const [mine, theirs] of [
    [names.heartbeats, `${prefix}gateway_heartbeats`],
    [names.models, `${prefix}gateway_model_usage`],
    [names.samples, `${prefix}availability_samples`],
  ] as const)
    await pool.query(`CREATE TABLE IF NOT EXISTS ${mine} (LIKE ${theirs})`);

  const u = new URL(questdbHttpUrl);
  const sender = await Sender.fromConfig(`http::addr=${u.hostname}:${u.port || 9000};auto_flush=off;`);
  let waiting: (() => void)[] = [];
  let failed: ((err: Error) => void)[] = [];
  let flushing: Promise<void> | null = null;
  const flushLoop = async () => {
    while (waiting.length > 0) {
      const done = waiting;
      const fail = failed;
      waiting = [];
      failed = [];
      try {
        await sender.flush();
        for (const d of done) d();
      } catch (err) {
        for (const f of fail) f(err as Error);
      }
    }
    flushing = null;
  };
  const committed = () =>
    new Promise<void>((resolve, reject) => {
      waiting.push(resolve);
      failed.push(reject);
      flushing ??= flushLoop();
    });

  const connectionOf = new Map<string, string>();
  let seq = 0;
  const app = Fastify({ logger: false });
  app.post("/v1/gateway/ingest", async (req, reply) => {
    const key = req.headers.authorization ?? "";
    let connectionId = connectionOf.get(key);
    if (!connectionId) {
      connectionId = `mp-${connectionOf.size}`;
      connectionOf.set(key, connectionId);
    }
    const b = req.body as {
      gateway: { status: string; latencyMs?: number; version?: string };
      system?: { gatewayPidAlive?: boolean };
      tokens: {
        period: {
          inputTokens: number;
          outputTokens: number;
          requestCount: number;
          cacheReadTokens?: number;
          cacheWriteTokens?: number;
          startedAt: string;
          endedAt: string;
        };
        byModel: { model: string; inputTokens: number; outputTokens: number; estimatedCostUsd?: number }[];
      };
    };
    const p = b.tokens.period;
    const at = Date.parse(p.endedAt);
    const heartbeatId = `${connectionId}-${++seq}`;
    const healthy = b.gateway.status === "healthy";
    await sender
      .table(names.heartbeats)
      .symbol("connection_id", connectionId)
      .symbol("status", b.gateway.status)
      .stringColumn("heartbeat_id", heartbeatId)
      .booleanColumn("healthy", healthy)
      .floatColumn("latency_ms", b.gateway.latencyMs ?? 0)
      .stringColumn("version", b.gateway.version ?? "")
      .booleanColumn("pid_alive", b.system?.gatewayPidAlive ?? true)
      .stringColumn("system", JSON.stringify(b.system ?? null))
      .timestampColumn("period_start", BigInt(Date.parse(p.startedAt)) * 1000n)
      .timestampColumn("period_end", BigInt(at) * 1000n)
      .intColumn("input_tokens", p.inputTokens)
      .intColumn("output_tokens", p.outputTokens)
      .intColumn("cache_read_tokens", p.cacheReadTokens ?? 0)
      .intColumn("cache_write_tokens", p.cacheWriteTokens ?? 0)
      .intColumn("request_count", p.requestCount)
      .floatColumn("cost_usd", 0)
      .timestampColumn("received_at", BigInt(Date.now()) * 1000n)
      .at(at, "ms");
    for (const m of b.tokens.byModel)
      await sender
        .table(names.models)
        .symbol("connection_id", connectionId)
        .symbol("model", m.model)
        .symbol("cost_source", "reported")
        .stringColumn("heartbeat_id", heartbeatId)
        .intColumn("input_tokens", m.inputTokens)
        .intColumn("output_tokens", m.outputTokens)
        .floatColumn("cost_usd", m.estimatedCostUsd ?? 0)
        .at(at, "ms");
    await sender
      .table(names.samples)
      .symbol("connection_id", connectionId)
      .symbol("source", "heartbeat")
      .booleanColumn("available", healthy)
      .booleanColumn("synthetic", false)
      .floatColumn("response_time_ms", b.gateway.latencyMs ?? 0)
      .at(at, "ms");
    await committed();
    return reply.code(201).send({ message: "ok", heartbeat_id: heartbeatId });
  });
  const url = await app.listen({ host: "127.0.0.1", port: 0 });
  return {
    app,
    url,
    async close() {
      await app.close();
      await flushing;
      await sender.close();
    },
  };
}

/**
 * The *minimal pipeline* of `bench otlp` (issue #35, point 5): the fastest way to store what an
 * OTLP metrics export of GenAI usage carries, to measure Vigil's OTLP ingest against. A bare
 * Fastify route takes `POST /v1/otlp/v1/metrics` (protobuf, gzip or not), decodes it with Vigil's
 * own decoder (src/otlp/decode.ts, protobufjs and the OpenTelemetry project's .proto files), maps
 * it as Vigil does, and writes the same rows as for a heartbeat (one `gateway_heartbeats` row per
 * export and instance, one `gateway_model_usage` row per model, one `availability_samples` row)
 * with the official `@questdb/nodejs-client` sender, answering 200 with an empty
 * ExportMetricsServiceResponse only after the flush that carried its rows was committed (grouped
 * as in `minimalPipeline`). Its rows name each connection by the id Vigil gives it (a UUID, when
 * the benchmark passes `connectionIds`), so they are the same bytes as Vigil's for the same
 * information; until 2026-11-29 they named it `mpo-<n>`, about 700 bytes less an export for
 * QuestDB to take.
 *
 * The mapping, and nothing more: `gen_ai.client.token.usage` histograms give each model's input
 * and output tokens (their sums), `gen_ai.client.operation.duration` the requests (counts) and
 * the mean latency (sum / count); cumulative points become increments against the previous point
 * of the same series (kept in memory; a lower value or a new start time is a reset, counted in
 * full), delta points are taken as they are. A series is the connection, the instance, the metric,
 * the model and the token type. No authentication (the key names the connection), no validation,
 * no dedupe, no pricing.
 */
export async function minimalOtlpPipeline(
  pool: pg.Pool,
  questdbHttpUrl: string,
  prefix: string,
  /** Each `Authorization` header's connection id, as Vigil's rows name it (else `mpo-<n>`). */
  connectionIds: ReadonlyMap<string, string> = new Map(),
): Promise<{
  app: FastifyInstance;
  url: string;
  /** Flushes (commits) made and rows written so far. */
  commits(): { commits: number; rows: number };
  close(): Promise<void>;
}> {
  const names = {
    heartbeats: `${prefix}mpo_gateway_heartbeats`,
    models: `${prefix}mpo_gateway_model_usage`,
    samples: `${prefix}mpo_availability_samples`,
  };
  for (const [mine, theirs] of [
    [names.heartbeats, `${prefix}gateway_heartbeats`],
    [names.models, `${prefix}gateway_model_usage`],
    [names.samples, `${prefix}availability_samples`],
  ] as const)
    await pool.query(`CREATE TABLE IF NOT EXISTS ${mine} (LIKE ${theirs})`);

  const u = new URL(questdbHttpUrl);
  const sender = await Sender.fromConfig(`http::addr=${u.hostname}:${u.port || 9000};auto_flush=off;`);
  let waiting: (() => void)[] = [];
  let failed: ((err: Error) => void)[] = [];
  let flushing: Promise<void> | null = null;
  const stats = { commits: 0, rows: 0 };
  const flushLoop = async () => {
    while (waiting.length > 0) {
      const done = waiting;
      const fail = failed;
      waiting = [];
      failed = [];
      try {
        stats.commits++;
        await sender.flush();
        for (const d of done) d();
      } catch (err) {
        for (const f of fail) f(err as Error);
      }
    }
    flushing = null;
  };
  const committed = () =>
    new Promise<void>((resolve, reject) => {
      waiting.push(resolve);
      failed.push(reject);
      flushing ??= flushLoop();
    });

  const connectionOf = new Map<string, string>();
  /** cumulative series → its previous point: start and time (ms), count and sum */
  const previous = new Map<string, { start: number; time: number; count: number; sum: number }>();
  const ms = (ns: bigint) => Number(ns / 1_000_000n);
  let seq = 0;
  const app = Fastify({ logger: false, bodyLimit: 8 * 1024 * 1024 });
  app.addContentTypeParser("application/x-protobuf", { parseAs: "buffer" }, (_req, body, done) =>
    done(null, body),
  );
  app.post("/v1/otlp/v1/metrics", async (req, reply) => {
    const key = req.headers.authorization ?? "";
    let connectionId = connectionOf.get(key);
    if (!connectionId) {
      connectionId = connectionIds.get(key) ?? `mpo-${connectionOf.size}`;
      connectionOf.set(key, connectionId);
    }
    let body = req.body as Buffer;
    if (req.headers["content-encoding"] === "gzip") body = gunzipSync(body);
    const request = decodeMetricsRequest(body, "protobuf");
    for (const rm of request.resourceMetrics) {
      const instance = String(rm.resource.attributes["service.instance.id"] ?? "");
      const byModel = new Map<string, { input: number; output: number }>();
      let requests = 0;
      let seconds = 0;
      let begin = Number.POSITIVE_INFINITY;
      let end = 0;
      for (const sm of rm.scopeMetrics)
        for (const m of sm.metrics) {
          if (m.type !== "histogram") continue;
          const tokens = m.name === "gen_ai.client.token.usage";
          if (!tokens && m.name !== "gen_ai.client.operation.duration") continue;
          const cumulative = m.aggregationTemporality === "cumulative";
          for (const p of m.dataPoints) {
            const a = p.attributes;
            const model = String(a["gen_ai.response.model"] ?? a["gen_ai.request.model"] ?? "");
            const type = tokens ? String(a["gen_ai.token.type"] ?? "") : "";
            let count = p.count;
            let sum = p.sum ?? 0;
            const at = ms(p.timeUnixNano);
            let from = ms(p.startTimeUnixNano);
            if (cumulative) {
              // the increment since the series' previous point; a new start or a lower value is a reset
              const k = `${connectionId}\u0000${instance}\u0000${m.name}\u0000${model}\u0000${type}`;
              const prev = previous.get(k);
              previous.set(k, { start: from, time: at, count, sum });
              if (prev && prev.start === from && count >= prev.count && sum >= prev.sum) {
                count -= prev.count;
                sum -= prev.sum;
                from = prev.time;
              }
            }
            begin = Math.min(begin, from);
            end = Math.max(end, at);
            if (tokens) {
              const row = byModel.get(model) ?? { input: 0, output: 0 };
              if (type === "input") row.input += sum;
              else if (type === "output") row.output += sum;
              byModel.set(model, row);
            } else {
              requests += count;
              seconds += sum;
            }
          }
        }
      if (end === 0) continue;
      const heartbeatId = `${connectionId}-${++seq}`;
      const latencyMs = requests > 0 ? (seconds / requests) * 1000 : 0;
      let input = 0;
      let output = 0;
      for (const r of byModel.values()) {
        input += r.input;
        output += r.output;
      }
      await sender
        .table(names.heartbeats)
        .symbol("connection_id", connectionId)
        .symbol("status", "healthy")
        .stringColumn("heartbeat_id", heartbeatId)
        .booleanColumn("healthy", true)
        .floatColumn("latency_ms", latencyMs)
        .stringColumn("version", String(rm.resource.attributes["service.version"] ?? ""))
        .booleanColumn("pid_alive", true)
        .timestampColumn("period_start", BigInt(Math.min(begin, end)) * 1000n)
        .timestampColumn("period_end", BigInt(end) * 1000n)
        .intColumn("input_tokens", Math.round(input))
        .intColumn("output_tokens", Math.round(output))
        .intColumn("cache_read_tokens", 0)
        .intColumn("cache_write_tokens", 0)
        .intColumn("request_count", Math.round(requests))
        .floatColumn("cost_usd", 0)
        .timestampColumn("received_at", BigInt(Date.now()) * 1000n)
        .at(end, "ms");
      stats.rows += byModel.size + 2; // the heartbeat, its models, the sample
      for (const [model, r] of byModel)
        await sender
          .table(names.models)
          .symbol("connection_id", connectionId)
          .symbol("model", model)
          .symbol("cost_source", "unpriced")
          .stringColumn("heartbeat_id", heartbeatId)
          .intColumn("input_tokens", Math.round(r.input))
          .intColumn("output_tokens", Math.round(r.output))
          .floatColumn("cost_usd", 0)
          .at(end, "ms");
      await sender
        .table(names.samples)
        .symbol("connection_id", connectionId)
        .symbol("source", "otlp")
        .booleanColumn("available", true)
        .booleanColumn("synthetic", false)
        .floatColumn("response_time_ms", latencyMs)
        .at(end, "ms");
    }
    await committed();
    return reply.code(200).header("content-type", "application/x-protobuf").send(Buffer.alloc(0));
  });
  const url = await app.listen({ host: "127.0.0.1", port: 0 });
  return {
    app,
    url,
    commits: () => ({ ...stats }),
    async close() {
      await app.close();
      await flushing;
      await sender.close();
    },
  };
}
