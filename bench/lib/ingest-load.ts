/**
 * Load generator for `vigil bench ingest`, run in its own process:
 *   node ingest-load.js '<json options>'
 * Sends gateway heartbeats (each request from the next gateway, with that gateway's key and its
 * next token period) or fixed usage batches, and prints autocannon's figures as JSON.
 */
import { createRequire } from "node:module";

interface Options {
  url: string;
  connections: number;
  seconds: number;
  mode: "heartbeat" | "usage";
  keys: string[];
  body?: string;
}

type Req = { method?: string; headers?: Record<string, string>; body?: string };
type Autocannon = (
  opts: Record<string, unknown>,
  done: (
    err: Error | null,
    result: {
      requests: { total: number };
      latency: { p50: number; p99: number };
      non2xx: number;
      errors: number;
      duration: number;
    },
  ) => void,
) => unknown;

const autocannon = createRequire(import.meta.url)("autocannon") as Autocannon;
const o = JSON.parse(process.argv[2] as string) as Options;

let next = 0;
const periods = o.keys.map(() => 0);
// Periods run one second each, faster than the clock (a gateway sends many a second here), so
// they start in the past: today's first second, or two hours ago. Today, as live heartbeats are.
const start = Math.max(Math.floor(Date.now() / 86_400_000) * 86_400_000 + 1000, Date.now() - 2 * 3_600_000);

function heartbeat(req: Req): Req {
  const g = next++ % o.keys.length;
  const i = periods[g]++;
  const startedAt = new Date(start + (i as number) * 1000).toISOString();
  const endedAt = new Date(start + ((i as number) + 1) * 1000).toISOString();
  req.headers = { "content-type": "application/json", authorization: `Bearer ${o.keys[g]}` };
  req.body = JSON.stringify({
    type: "heartbeat",
    gateway: { status: "healthy", latencyMs: 12, version: "2.4.1" },
    system: { gatewayPidAlive: true },
    tokens: {
      period: {
        inputTokens: 1200,
        outputTokens: 300,
        cacheReadTokens: 0,
        cacheWriteTokens: 0,
        requestCount: 4,
        startedAt,
        endedAt,
      },
      byModel: [
        { model: "claude-sonnet-4-5", inputTokens: 1000, outputTokens: 250 },
        { model: "gpt-4o-mini", inputTokens: 200, outputTokens: 50 },
      ],
    },
  });
  return req;
}

autocannon(
  {
    url: o.url,
    connections: o.connections,
    duration: o.seconds,
    requests: [
      o.mode === "heartbeat"
        ? { method: "POST", setupRequest: heartbeat }
        : {
            method: "POST",
            headers: { "content-type": "application/json", authorization: `Bearer ${o.keys[0]}` },
            body: o.body,
          },
    ],
  },
  (err, r) => {
    if (err) throw err;
    process.stdout.write(
      JSON.stringify({
        rps: r.requests.total / r.duration,
        p50: r.latency.p50,
        p99: r.latency.p99,
        requests: r.requests.total,
        non2xx: r.non2xx,
        errors: r.errors,
      }),
    );
  },
);
