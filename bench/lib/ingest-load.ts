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
  /**
   * Each connection sends the heartbeats of its own gateways only (gateway g on connection
   * g mod connections), as a daemon keeps its connection to one node; by default each request
   * comes from the next gateway, whichever connection sends it.
   */
  pinned?: boolean;
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
// Each gateway reports the period since its previous heartbeat, ending now, as a live daemon
// does: every heartbeat is a new period and rows arrive in time order, without the
// out-of-order merges QuestDB would do for periods spread over the past.
const lastEnd = o.keys.map(() => Date.now() - 1000);

type Ctx = { slot?: number };
const turns = new Map<number, number>();
let nextSlot = 0;

/** Pinned: connection `slot` sends for gateways slot, slot + connections, … in turn. */
function pinnedGateway(slot: number): number | undefined {
  const own = Math.ceil((o.keys.length - slot) / o.connections);
  if (own <= 0) return undefined;
  const turn = ((turns.get(slot) ?? -1) + 1) % own;
  turns.set(slot, turn);
  return slot + turn * o.connections;
}

function heartbeat(req: Req, context?: Ctx): Req {
  const pinned = o.pinned && context?.slot !== undefined ? pinnedGateway(context.slot) : undefined;
  const g = pinned ?? next++ % o.keys.length;
  const begin = lastEnd[g] as number;
  const end = Math.max(Date.now(), begin + 1);
  lastEnd[g] = end;
  const startedAt = new Date(begin).toISOString();
  const endedAt = new Date(end).toISOString();
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
    // pinned: each connection (client) gets its slot in the context every request is built with
    ...(o.pinned
      ? {
          setupClient(client: {
            requestIterator: { initialContext: Ctx; resetContext(): void; rebuildRequest(): void };
          }) {
            client.requestIterator.initialContext = { slot: nextSlot++ };
            client.requestIterator.resetContext();
            client.requestIterator.rebuildRequest();
          },
        }
      : {}),
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
        // this process's CPU for the whole run, so the bench can show the load generator's share
        cpuSeconds: (process.cpuUsage().user + process.cpuUsage().system) / 1e6,
      }),
    );
  },
);
