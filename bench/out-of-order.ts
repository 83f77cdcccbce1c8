import { parseArgs } from "node:util";
import type { Config } from "../src/config.js";
import { applyQuestdbSchema, createQuestdbSeriesStore, questdbPool } from "../src/stores/series/questdb.js";
import {
  availabilitySamples,
  gatewayHeartbeats,
  gatewayModelUsage,
  type RowOf,
} from "../src/stores/series/tables.js";
import type { TableRows } from "../src/stores/series/types.js";
import { listenerPid, processCpuSeconds } from "./lib/cpu.js";
import { positiveInt } from "./lib/postgres.js";
import { benchQuestdb } from "./lib/questdb.js";
import { fmt, table } from "./lib/report.js";

/**
 * `vigil bench out-of-order`: what QuestDB spends per heartbeat when commits arrive out of
 * time order, against the same flushes in order, in the same run. Each flush carries the rows
 * heartbeat ingest writes (a heartbeat row, two per-model rows, an availability sample) for
 * `--heartbeats` gateways, at `--rate` flushes per second, as group commit sends them under load.
 * In order, every flush is newer than the last; out of order, each flush's timestamps spread
 * over the last `--spread` ms, as gateways' clocks and request interleaving make them.
 * Needs QuestDB on this host (its CPU is read from /proc).
 */
export async function run(config: Config, args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      seconds: { type: "string", default: "8" },
      rate: { type: "string", default: "70" },
      heartbeats: { type: "string", default: "80" },
      spread: { type: "string", default: "40" },
    },
  });
  const seconds = positiveInt("seconds", values.seconds);
  const rate = positiveInt("rate", values.rate);
  const perFlush = positiveInt("heartbeats", values.heartbeats);
  const spread = positiveInt("spread", values.spread);
  const say = (s: string) => process.stderr.write(`${s}\n`);

  const qdb = benchQuestdb(config, say);
  const pid = listenerPid(qdb.httpUrl);
  if (pid === undefined) say("QuestDB is not on this host: its CPU cannot be read, figures show n/a");
  const pool = questdbPool(qdb.pgUrl, 1);
  const connections = Array.from({ length: 200 }, (_, i) => `gw-${i}`);
  const results: { order: string; cpuUs: number; p50: number; p99: number; flushes: number }[] = [];
  try {
    // Alternate the two, twice, and keep each one's best round, so neither gains from running second.
    for (const order of ["in order", "out of order", "in order", "out of order"] as const) {
      const prefix = `o3${Date.now().toString(36)}_`;
      await applyQuestdbSchema(pool, prefix);
      const store = await createQuestdbSeriesStore({
        httpUrl: qdb.httpUrl,
        pgUrl: qdb.pgUrl,
        tablePrefix: prefix,
      });
      say(`${order}: ${rate} flushes/s of ${perFlush} heartbeats for ${seconds} s`);
      let n = 0;
      let seq = 0;
      const latencies: number[] = [];
      const cpu0 = processCpuSeconds(pid);
      const started = Date.now();
      while (Date.now() - started < seconds * 1000) {
        const wait = started + (n * 1000) / rate - Date.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        const now = Date.now();
        const t0 = performance.now();
        await store.write(
          heartbeatRows(perFlush, (i) => {
            const ts = order === "in order" ? now : now - ((i * 7919) % spread);
            return {
              ts: new Date(ts),
              connection: connections[seq++ % connections.length] as string,
              id: `hb_${seq}`,
            };
          }),
        );
        latencies.push(performance.now() - t0);
        n++;
      }
      const elapsed = (Date.now() - started) / 1000;
      const cpu = processCpuSeconds(pid) - cpu0;
      latencies.sort((a, b) => a - b);
      const previous = results.findIndex((r) => r.order === order);
      const result = {
        order,
        cpuUs: (cpu * 1e6) / (n * perFlush),
        p50: latencies[Math.floor(latencies.length / 2)] ?? Number.NaN,
        p99: latencies[Math.floor(latencies.length * 0.99)] ?? Number.NaN,
        flushes: n / elapsed,
      };
      if (previous < 0) results.push(result);
      else if (result.cpuUs < (results[previous] as typeof result).cpuUs) results[previous] = result;
      await store.close();
      const tables = await pool.query("SELECT table_name FROM tables() WHERE table_name LIKE $1", [
        `${prefix}%`,
      ]);
      for (const r of tables.rows as { table_name: string }[]) await pool.query(`DROP TABLE ${r.table_name}`);
    }
  } finally {
    await pool.end();
    qdb.stop();
  }

  const [inOrder, outOfOrder] = results as [(typeof results)[0], (typeof results)[0]];
  console.log(
    `\nout-of-order: QuestDB CPU per heartbeat (4 rows in 3 tables), ${fmt(rate)} flushes/s of ${fmt(perFlush)} heartbeats, ${seconds} s rounds, best of 2\n`,
  );
  console.log(
    table(
      ["commits", "flushes/s", "QuestDB us/heartbeat", "flush p50 ms", "flush p99 ms", "ratio"],
      results.map((r) => [
        r.order === "in order" ? "in order (baseline)" : `out of order (spread ${spread} ms)`,
        fmt(r.flushes),
        fmt(r.cpuUs),
        fmt(r.p50, 1),
        fmt(r.p99, 1),
        fmt(r.cpuUs / inOrder.cpuUs, 2),
      ]),
    ),
  );
  console.log(
    `\nout-of-order commits cost QuestDB ${fmt(outOfOrder.cpuUs / inOrder.cpuUs, 2)}x the CPU of in-order ones (printed, no target)`,
  );
}

type Hb = { ts: Date; connection: string; id: string };

/** The rows POST /v1/gateway/ingest writes for one heartbeat with two models (src/ingest/heartbeat.ts). */
function heartbeatRows(count: number, next: (i: number) => Hb): TableRows[] {
  const hbs: RowOf<typeof gatewayHeartbeats>[] = [];
  const models: RowOf<typeof gatewayModelUsage>[] = [];
  const samples: RowOf<typeof availabilitySamples>[] = [];
  for (let i = 0; i < count; i++) {
    const { ts, connection, id } = next(i);
    hbs.push({
      ts,
      connection_id: connection,
      heartbeat_id: id,
      status: "healthy",
      healthy: true,
      latency_ms: 12,
      version: "2.4.1",
      pid_alive: true,
      system: '{"gatewayPidAlive":true}',
      period_start: new Date(ts.getTime() - 1000),
      period_end: ts,
      input_tokens: 1200,
      output_tokens: 300,
      cache_read_tokens: 0,
      cache_write_tokens: 0,
      request_count: 4,
      cost_usd: 0.0073,
      received_at: ts,
    });
    for (const [model, input, output] of [
      ["claude-sonnet-4-5", 1000, 250],
      ["gpt-4o-mini", 200, 50],
    ] as const)
      models.push({
        ts,
        connection_id: connection,
        heartbeat_id: id,
        model,
        input_tokens: input,
        output_tokens: output,
        cost_usd: 0.003,
        cost_source: "priced",
      });
    samples.push({
      ts,
      connection_id: connection,
      available: true,
      response_time_ms: 12,
      reason: null,
      error: null,
      synthetic: false,
      source: "heartbeat",
    });
  }
  return [
    { table: gatewayHeartbeats, rows: hbs },
    { table: gatewayModelUsage, rows: models },
    { table: availabilitySamples, rows: samples },
  ] as TableRows[];
}
