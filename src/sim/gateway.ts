import { type SimState, startSimServer } from "./server.js";

/**
 * An AI gateway daemon (`gateway`): every `intervalMs` it sends each of its keys' heartbeat to
 * Vigil's POST /v1/gateway/ingest, with a fresh token period and per-model usage.
 *
 * Control: POST /__sim/gateway {sending, status, pidAlive} stops or resumes sending (a stopped
 * daemon), or reports an unhealthy gateway or a dead process; GET /__sim/gateway tells what it
 * sent and what was acknowledged.
 */
export interface GatewayOptions {
  vigilUrl: string;
  keys: string[];
  intervalMs?: number;
  port?: number;
}

export async function startGatewaySim(opts: GatewayOptions) {
  const state: SimState = { fault: "none", latencyMs: 0 };
  const daemon = {
    sending: true,
    status: "healthy",
    pidAlive: true,
    sent: 0,
    acknowledged: 0,
    failed: 0,
    lastError: null as string | null,
  };
  const intervalMs = opts.intervalMs ?? 10_000;
  let periodStart = Date.now();

  const beat = async () => {
    if (!daemon.sending) return;
    const end = Date.now();
    const started = new Date(periodStart).toISOString();
    const ended = new Date(end).toISOString();
    periodStart = end;
    await Promise.all(
      opts.keys.map(async (key, i) => {
        const input = 1000 + ((i * 37) % 500);
        const output = 200 + ((i * 11) % 100);
        const body = {
          type: "heartbeat",
          gateway: { status: daemon.status, latencyMs: 20 + (i % 30), version: "sim-1.0.0" },
          system: { gatewayPidAlive: daemon.pidAlive },
          tokens: {
            period: {
              inputTokens: input,
              outputTokens: output,
              cacheReadTokens: 0,
              cacheWriteTokens: 0,
              requestCount: 3,
              startedAt: started,
              endedAt: ended,
            },
            byModel: [
              { model: "claude-sonnet-4-5", inputTokens: input - 100, outputTokens: output - 50 },
              { model: "gpt-4o-mini", inputTokens: 100, outputTokens: 50 },
            ],
          },
        };
        daemon.sent++;
        try {
          const r = await fetch(`${opts.vigilUrl}/v1/gateway/ingest`, {
            method: "POST",
            headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
            body: JSON.stringify(body),
          });
          if (r.status === 201) daemon.acknowledged++;
          else {
            daemon.failed++;
            daemon.lastError = `HTTP ${r.status}: ${await r.text()}`;
          }
        } catch (err) {
          daemon.failed++;
          daemon.lastError = (err as Error).message;
        }
      }),
    );
  };
  const timer = setInterval(() => void beat(), intervalMs);

  const sim = await startSimServer({
    port: opts.port,
    state,
    platform: () => [404, { message: "a gateway daemon has no platform API" }],
    control: (req, url, body) => {
      if (url.pathname !== "/__sim/gateway") return [404, { error: "no such control route" }];
      if (req.method === "POST") {
        const b = (body ?? {}) as { sending?: boolean; status?: string; pidAlive?: boolean };
        if (b.sending !== undefined) daemon.sending = Boolean(b.sending);
        if (typeof b.status === "string" && b.status) daemon.status = b.status;
        if (b.pidAlive !== undefined) daemon.pidAlive = Boolean(b.pidAlive);
      }
      return [200, daemon];
    },
  });
  const close = sim.close;
  return Object.assign(sim, {
    daemon,
    beat,
    close: async () => {
      clearInterval(timer);
      await close();
    },
  });
}
