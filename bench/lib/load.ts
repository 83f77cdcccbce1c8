import { execFile } from "node:child_process";
import path from "node:path";
import { packageRoot } from "../../src/lib/paths.js";

export interface LoadResult {
  rps: number;
  p50: number;
  p99: number;
  requests: number;
  non2xx: number;
  errors: number;
}

/**
 * Drives `url` with autocannon in a separate process, so the load generator does not share
 * the server's event loop, and returns throughput and latency (ms).
 */
export function load(
  url: string,
  opts: {
    connections: number;
    seconds: number;
    headers?: Record<string, string>;
    method?: string;
    body?: string;
  },
): Promise<LoadResult> {
  const bin = path.join(packageRoot, "node_modules/autocannon/autocannon.js");
  const args = [bin, "-j", "-c", String(opts.connections), "-d", String(opts.seconds)];
  for (const [k, v] of Object.entries(opts.headers ?? {})) args.push("-H", `${k}=${v}`);
  if (opts.method) args.push("-m", opts.method);
  if (opts.body) args.push("-b", opts.body);
  args.push(url);
  return new Promise((resolve, reject) => {
    execFile(process.execPath, args, { maxBuffer: 16 * 1024 * 1024 }, (err, stdout) => {
      if (err) return reject(err);
      const r = JSON.parse(stdout) as {
        requests: { average: number; total: number };
        latency: { p50: number; p99: number };
        non2xx: number;
        errors: number;
        duration: number;
      };
      resolve({
        rps: r.requests.total / r.duration,
        p50: r.latency.p50,
        p99: r.latency.p99,
        requests: r.requests.total,
        non2xx: r.non2xx,
        errors: r.errors,
      });
    });
  });
}
