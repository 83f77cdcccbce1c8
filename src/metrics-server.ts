import http from "node:http";
import type { Logger } from "pino";
import type { Config } from "./config.js";
import { bearerMatches, METRICS_CONTENT_TYPE, type MetricsBody } from "./lib/metrics.js";

/**
 * The admin listener of METRICS_PORT (on METRICS_HOST, loopback by default): `GET /metrics` and
 * nothing else, apart from the API, so a scraper needs no API key and the metrics are not on the
 * public port. With METRICS_TOKEN set it asks for the token here too. `vigil serve` runs it for
 * its one process; with `--workers N` the primary runs it and answers for the whole group.
 */
export async function startMetricsListener(
  config: Config,
  text: () => Promise<MetricsBody>,
  log: Logger,
): Promise<{ close(): Promise<void>; port: number }> {
  const { port, host, token } = config.metrics;
  if (port === undefined) throw new Error("METRICS_PORT is not set");
  const server = http.createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    const answer = (status: number, body: MetricsBody, headers: Record<string, string> = {}) => {
      res.writeHead(status, { "Content-Type": "text/plain; charset=utf-8", ...headers });
      res.end(body);
    };
    if (path !== "/metrics") return answer(404, "Not found: scrape GET /metrics.\n");
    if (req.method !== "GET" && req.method !== "HEAD")
      return answer(405, "Use GET /metrics.\n", { Allow: "GET, HEAD" });
    if (token && !bearerMatches(req.headers.authorization, token))
      return answer(401, "Send the metrics token (METRICS_TOKEN) as Authorization: Bearer <token>.\n", {
        "WWW-Authenticate": 'Bearer realm="vigil-metrics"',
      });
    text().then(
      (body) =>
        answer(200, req.method === "HEAD" ? "" : body, {
          "Content-Type": METRICS_CONTENT_TYPE,
          "Cache-Control": "no-store",
        }),
      (err: unknown) => {
        log.warn({ err: (err as Error).message }, "metrics scrape failed");
        answer(503, "The metrics could not be gathered; scrape again.\n");
      },
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolve());
  });
  const bound = (server.address() as { port: number }).port;
  log.info(
    { metrics: `http://${host.includes(":") ? `[${host}]` : host}:${bound}/metrics` },
    "metrics listener up",
  );
  return {
    port: bound,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
