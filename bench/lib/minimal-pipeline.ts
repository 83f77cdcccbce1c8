import { Sender } from "@questdb/nodejs-client";
import Fastify, { type FastifyInstance } from "fastify";
import type pg from "pg";

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
