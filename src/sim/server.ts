import http from "node:http";
import type { AddressInfo, Socket } from "node:net";

/**
 * Shared machinery of the platform simulators: a plain node:http server (so a simulator can
 * misbehave in ways a framework would prevent: hang, close mid-response, redirect forever) with
 * a control API under /__sim that tests and benchmarks use to change its behaviour.
 */
export type Fault = "none" | "down" | "hang" | "garbage" | "huge" | "redirect" | "close" | "bad_credentials";
export const FAULTS: Fault[] = [
  "none",
  "down",
  "hang",
  "garbage",
  "huge",
  "redirect",
  "close",
  "bad_credentials",
];

export interface SimState {
  fault: Fault;
  /** Added before every platform answer, in ms. */
  latencyMs: number;
}

export type Handler = (
  req: http.IncomingMessage,
  url: URL,
  body: unknown,
) => Promise<[number, unknown]> | [number, unknown];

export interface SimServer {
  url: string;
  state: SimState;
  server: http.Server;
  close(): Promise<void>;
}

const json = (res: http.ServerResponse, status: number, body: unknown) => {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
};

async function readBody(req: http.IncomingMessage): Promise<unknown> {
  let data = "";
  for await (const chunk of req) {
    data += chunk;
    if (data.length > 1_000_000) break;
  }
  if (!data) return undefined;
  try {
    return JSON.parse(data);
  } catch {
    return undefined;
  }
}

/**
 * Serves `platform` (the simulated platform's own routes) and `control` (extra /__sim routes).
 * Faults apply to platform routes only; the control API always answers.
 */
export async function startSimServer(opts: {
  port?: number;
  host?: string;
  state: SimState;
  platform: Handler;
  control?: Handler;
}): Promise<SimServer> {
  const state = opts.state;
  const sockets = new Set<Socket>();
  const server = http.createServer(async (req, res) => {
    const url = new URL(req.url ?? "/", "http://sim");
    const body = await readBody(req);
    try {
      if (url.pathname.startsWith("/__sim")) {
        if (url.pathname === "/__sim/state" && req.method === "GET") return json(res, 200, state);
        if (url.pathname === "/__sim/state" && req.method === "POST") {
          const b = (body ?? {}) as Partial<SimState>;
          if (b.fault !== undefined) {
            if (!FAULTS.includes(b.fault))
              return json(res, 400, { error: `fault must be one of ${FAULTS.join(", ")}` });
            state.fault = b.fault;
          }
          if (b.latencyMs !== undefined) {
            if (typeof b.latencyMs !== "number" || b.latencyMs < 0)
              return json(res, 400, { error: "latencyMs must be a number >= 0" });
            state.latencyMs = b.latencyMs;
          }
          return json(res, 200, state);
        }
        if (opts.control) {
          const [status, out] = await opts.control(req, url, body);
          return json(res, status, out);
        }
        return json(res, 404, { error: "no such control route" });
      }

      if (state.latencyMs > 0) await new Promise((r) => setTimeout(r, state.latencyMs));
      switch (state.fault) {
        case "down":
          return json(res, 503, { message: "service unavailable" });
        case "hang":
          return; // never answers; the caller's timeout must fire
        case "garbage":
          res.writeHead(200, { "content-type": "application/json" });
          return res.end("<html>definitely not json");
        case "huge": {
          res.writeHead(200, { "content-type": "application/json" });
          const chunk = Buffer.alloc(64 * 1024, 0x61);
          let sent = 0;
          const pump = () => {
            while (sent < 64 * 1024 * 1024) {
              sent += chunk.length;
              if (!res.write(chunk)) return res.once("drain", pump);
            }
            res.end();
          };
          res.on("close", () => {
            sent = Number.POSITIVE_INFINITY;
          });
          return pump();
        }
        case "redirect":
          res.writeHead(302, { location: `${url.pathname}?r=${Date.now()}` });
          return res.end();
        case "close":
          res.writeHead(200, { "content-type": "application/json", "content-length": "1000" });
          res.write('{"partial":');
          return req.socket.destroy();
        default: {
          const [status, out] = await opts.platform(req, url, body);
          return json(res, status, out);
        }
      }
    } catch (err) {
      return json(res, 500, { error: (err as Error).message });
    }
  });
  server.on("connection", (s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(opts.port ?? 0, opts.host ?? "127.0.0.1", resolve));
  const addr = server.address() as AddressInfo;
  return {
    url: `http://${opts.host ?? "127.0.0.1"}:${addr.port}`,
    state,
    server,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
