/**
 * Load generator for `vigil bench otlp`, run in its own process:
 *   node otlp-load.js '<json options>'
 * Sends the exports of simulated gateways (bench/lib/otlp-exports.ts), as OTLP/HTTP protobuf or as
 * the same data in heartbeats, and prints its figures as JSON on stdout.
 *
 * - steady: every exporter sends once per interval (exporters spread evenly over the interval),
 *   each over its own keep-alive connection and one request at a time, as a gateway's periodic
 *   exporter does; every answer is awaited, so what was acknowledged is known exactly.
 * - saturate: autocannon with `connections` connections as fast as the server answers; each
 *   connection sends for its own exporters only (exporter e on connection e mod connections), so
 *   an exporter's sends never overtake each other, as with a real exporter.
 *
 * The exporters' state (send count, start, last time) comes in with the options and goes back
 * with the figures, so the cumulative series go on from one run to the next.
 */
import http from "node:http";
import { createRequire } from "node:module";
import zlib from "node:zlib";
import { ExportBody, heartbeatTemplate, sdkExport, type Temporality } from "./otlp-exports.js";

export interface ExporterState {
  /** sends made so far (the last send's number) */
  n: number;
  /** the exporter's start (cumulative start time), ms */
  startMs: number;
  /** the last send's time (its points' time, its heartbeat's period end), ms */
  lastMs: number;
}

export interface OtlpLoadOptions {
  url: string;
  mode: "otlp" | "heartbeat";
  phase: "steady" | "saturate";
  keys: string[];
  models: number;
  temporality: Temporality;
  gzip: boolean;
  seconds: number;
  /** saturate: concurrent connections (at most one per exporter) */
  connections: number;
  /** steady: seconds between an exporter's sends */
  interval: number;
  /** steady: stop after this many sends per exporter */
  sendsPerExporter?: number;
  state: ExporterState[];
}

export interface OtlpLoadResult {
  rps: number;
  p50: number;
  p99: number;
  max: number;
  requests: number;
  non2xx: number;
  errors: number;
  /** answers by status code (steady only) */
  statuses: Record<string, number>;
  /** CPU seconds of this process from the first send to the last answer */
  cpuSeconds: number;
  /** bytes of one request body (the last one sent) */
  bodyBytes: number;
  state: ExporterState[];
  /** steady: per exporter, the sends answered 2xx and the number of the last of them */
  acked?: { count: number; lastN: number }[];
}

const o = JSON.parse(process.argv[2] as string) as OtlpLoadOptions;
const state = o.state.map((s) => ({ ...s }));

/** The next send of exporter e: its body, with its number and period taken from the state. */
async function sender(): Promise<(e: number) => { body: Buffer; n: number }> {
  if (o.mode === "heartbeat") {
    const templates = o.keys.map((_, e) => heartbeatTemplate(e, o.models));
    return (e) => {
      const s = state[e] as ExporterState;
      const end = Math.max(Date.now(), s.lastMs + 1);
      const body = Buffer.from((templates[e] as (a: number, b: number) => string)(s.lastMs, end));
      s.lastMs = end;
      s.n++;
      return { body, n: s.n };
    };
  }
  const bodies: ExportBody[] = [];
  for (let e = 0; e < o.keys.length; e++)
    bodies.push(new ExportBody(await sdkExport(e, o.models, o.temporality)));
  return (e) => {
    const s = state[e] as ExporterState;
    const time = Math.max(Date.now(), s.lastMs + 1);
    s.n++;
    const start = o.temporality === "cumulative" ? s.startMs : s.lastMs;
    let body = (bodies[e] as ExportBody).patch(s.n, start, time, o.temporality);
    s.lastMs = time;
    if (o.gzip) body = zlib.gzipSync(body);
    return { body, n: s.n };
  };
}

function headers(e: number): Record<string, string> {
  const h: Record<string, string> = {
    authorization: `Bearer ${o.keys[e]}`,
    "content-type": o.mode === "otlp" ? "application/x-protobuf" : "application/json",
  };
  if (o.gzip && o.mode === "otlp") h["content-encoding"] = "gzip";
  return h;
}

const percentile = (sorted: number[], q: number) =>
  sorted.length ? (sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] as number) : NaN;

async function steady(next: (e: number) => { body: Buffer; n: number }): Promise<OtlpLoadResult> {
  const url = new URL(o.url);
  const exporters = o.keys.length;
  const latencies: number[] = [];
  const statuses: Record<string, number> = {};
  const acked = o.keys.map(() => ({ count: 0, lastN: 0 }));
  let errors = 0;
  let bodyBytes = 0;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const deadline = t0 + o.seconds * 1000;
  const maxSends = o.sendsPerExporter ?? Number.POSITIVE_INFINITY;
  const send = (agent: http.Agent, e: number) =>
    new Promise<void>((resolve) => {
      const { body, n } = next(e);
      bodyBytes = body.length;
      const started = performance.now();
      const req = http.request(
        {
          host: url.hostname,
          port: url.port,
          path: url.pathname,
          method: "POST",
          agent,
          headers: { ...headers(e), "content-length": String(body.length) },
          timeout: 30_000,
        },
        (res) => {
          res.resume();
          res.on("end", () => {
            latencies.push(performance.now() - started);
            const code = res.statusCode ?? 0;
            statuses[code] = (statuses[code] ?? 0) + 1;
            if (code >= 200 && code < 300) {
              const a = acked[e] as { count: number; lastN: number };
              a.count++;
              a.lastN = n;
            }
            resolve();
          });
        },
      );
      req.on("timeout", () => req.destroy(new Error("timeout")));
      req.on("error", () => {
        errors++;
        resolve();
      });
      req.end(body);
    });
  await Promise.all(
    o.keys.map(async (_, e) => {
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
      // exporter e's sends at offset e/exporters of the interval, then every interval
      let at = t0 + (e * o.interval * 1000) / exporters;
      for (let i = 0; i < maxSends && at < deadline; i++) {
        const wait = at - performance.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        await send(agent, e);
        at += o.interval * 1000;
      }
      agent.destroy();
    }),
  );
  const wall = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const sorted = [...latencies].sort((a, b) => a - b);
  const ok = Object.entries(statuses).reduce((s, [c, k]) => (Number(c) < 300 ? s + k : s), 0);
  return {
    rps: latencies.length / wall,
    p50: percentile(sorted, 0.5),
    p99: percentile(sorted, 0.99),
    max: sorted.at(-1) ?? NaN,
    requests: latencies.length,
    non2xx: latencies.length - ok,
    errors,
    statuses,
    cpuSeconds: (cpu.user + cpu.system) / 1e6,
    bodyBytes,
    state,
    acked,
  };
}

type Req = { method?: string; headers?: Record<string, string>; body?: Buffer };
type Ctx = { slot?: number };
type Autocannon = (
  opts: Record<string, unknown>,
  done: (
    err: Error | null,
    result: {
      requests: { total: number };
      latency: { p50: number; p99: number; max: number };
      non2xx: number;
      errors: number;
      duration: number;
    },
  ) => void,
) => unknown;

function saturate(next: (e: number) => { body: Buffer; n: number }): Promise<OtlpLoadResult> {
  const autocannon = createRequire(import.meta.url)("autocannon") as Autocannon;
  const connections = Math.min(o.connections, o.keys.length);
  const turns = new Map<number, number>();
  let nextSlot = 0;
  let bodyBytes = 0;
  // connection `slot` sends for exporters slot, slot + connections, … in turn
  const exporterOf = (slot: number) => {
    const own = Math.ceil((o.keys.length - slot) / connections);
    const turn = ((turns.get(slot) ?? -1) + 1) % own;
    turns.set(slot, turn);
    return slot + turn * connections;
  };
  const setupRequest = (req: Req, context?: Ctx) => {
    const e = exporterOf(context?.slot ?? 0);
    const { body } = next(e);
    bodyBytes = body.length;
    req.headers = headers(e);
    req.body = body;
    return req;
  };
  const cpu0 = process.cpuUsage();
  return new Promise((resolve, reject) => {
    autocannon(
      {
        url: o.url,
        connections,
        duration: o.seconds,
        setupClient(client: {
          requestIterator: { initialContext: Ctx; resetContext(): void; rebuildRequest(): void };
        }) {
          client.requestIterator.initialContext = { slot: nextSlot++ };
          client.requestIterator.resetContext();
          client.requestIterator.rebuildRequest();
        },
        requests: [{ method: "POST", setupRequest }],
      },
      (err, r) => {
        if (err) return reject(err);
        const cpu = process.cpuUsage(cpu0);
        resolve({
          rps: r.requests.total / r.duration,
          p50: r.latency.p50,
          p99: r.latency.p99,
          max: r.latency.max,
          requests: r.requests.total,
          non2xx: r.non2xx,
          errors: r.errors,
          statuses: {},
          cpuSeconds: (cpu.user + cpu.system) / 1e6,
          bodyBytes,
          state,
        });
      },
    );
  });
}

const next = await sender();
const result = o.phase === "steady" ? await steady(next) : await saturate(next);
process.stdout.write(JSON.stringify(result));
