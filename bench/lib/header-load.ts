import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import type { LoadResult } from "./load.js";

/** What one closed-loop load answered: throughput, latency (ms) and what came back. */
export interface CountedLoad extends LoadResult {
  seconds: number;
  /** Responses by status code. */
  statuses: Record<string, number>;
  /** Responses that carried `count.header` with the value `count.value`. */
  marked: number;
  /** Responses whose `content-encoding` was the one asked for in `expectEncoding` (all when unset). */
  encoded: number;
  timeouts: number;
}

export interface CountedLoadOptions {
  connections: number;
  seconds: number;
  headers?: Record<string, string>;
  /** A response header to count, e.g. x-vigil-stale: true. */
  count?: { header: string; value: string };
  /** The content-encoding every response should have (counted in `encoded`). */
  expectEncoding?: string;
}

/**
 * Drives `url` with autocannon, as bench/lib/load.ts does, but through its API in a process of its
 * own (this file run as a script), so it can also count status codes and one response header (a
 * served-stale marker) without collecting bodies. `nice` lowers the load generator's priority.
 */
export function countedLoad(url: string, opts: CountedLoadOptions, nice = 0): Promise<CountedLoad> {
  const script = fileURLToPath(import.meta.url);
  const node = [process.execPath, script, RUN_FLAG, JSON.stringify({ url, ...opts })];
  const [cmd, ...args] = nice > 0 ? ["nice", "-n", String(nice), ...node] : node;
  return new Promise((resolve, reject) => {
    const child = spawn(cmd as string, args, { stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.once("error", reject);
    child.once("exit", (code) => {
      if (code !== 0) return reject(new Error(`the load generator exited with ${String(code)}`));
      resolve(JSON.parse(out.trim().split("\n").at(-1) as string) as CountedLoad);
    });
  });
}

const RUN_FLAG = "--counted-load";

interface AutocannonResult {
  requests: { total: number };
  latency: { p50: number; p99: number };
  duration: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  statusCodeStats?: Record<string, { count: number }>;
}

interface AutocannonClient {
  on(event: "headers", fn: (info: { statusCode: number; headers: string[] }) => void): void;
}

type Autocannon = (opts: {
  url: string;
  connections: number;
  duration: number;
  headers?: Record<string, string>;
  setupClient?: (client: AutocannonClient) => void;
}) => Promise<AutocannonResult>;

async function main(o: CountedLoadOptions & { url: string }): Promise<CountedLoad> {
  // autocannon ships no types; the part used here is typed above
  const autocannon = createRequire(import.meta.url)("autocannon") as Autocannon;
  const header = o.count?.header.toLowerCase();
  let marked = 0;
  let encoded = 0;
  const r = await autocannon({
    url: o.url,
    connections: o.connections,
    duration: o.seconds,
    headers: o.headers,
    setupClient: (client) =>
      client.on("headers", ({ headers }) => {
        let enc: string | undefined;
        for (let i = 0; i < headers.length; i += 2) {
          const name = (headers[i] as string).toLowerCase();
          if (name === header && headers[i + 1] === o.count?.value) marked++;
          else if (name === "content-encoding") enc = headers[i + 1];
        }
        if (!o.expectEncoding || enc === o.expectEncoding) encoded++;
      }),
  });
  const statuses: Record<string, number> = {};
  for (const [code, s] of Object.entries(r.statusCodeStats ?? {})) statuses[code] = s.count;
  return {
    rps: r.requests.total / r.duration,
    p50: r.latency.p50,
    p99: r.latency.p99,
    requests: r.requests.total,
    non2xx: r.non2xx,
    errors: r.errors,
    timeouts: r.timeouts,
    seconds: r.duration,
    statuses,
    marked,
    encoded,
  };
}

if (process.argv[2] === RUN_FLAG && process.argv[1] === fileURLToPath(import.meta.url)) {
  const result = await main(JSON.parse(process.argv[3] as string) as CountedLoadOptions & { url: string });
  process.stdout.write(`${JSON.stringify(result)}\n`);
  process.exit(0);
}
