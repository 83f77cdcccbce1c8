import type { FastifyInstance } from "fastify";
import type { AppContext } from "../core/context.js";
import {
  bearerMatches,
  httpDuration,
  httpRequests,
  METRICS_CONTENT_TYPE,
  type MetricsBody,
  metricsText,
} from "../lib/metrics.js";
import { ApiError, renderError, unavailable } from "./errors.js";

/**
 * Every answered request counted in `vigil_http_requests_total` and timed in
 * `vigil_http_request_duration_seconds` by its route template
 * (never the path a caller typed: `/v1/connections/{id}` stays one series however many ids), and
 * `GET /metrics` on the API port: with METRICS_TOKEN set, for a scraper sending it as a bearer
 * token; without it, a 404 saying where the metrics are.
 */
export function registerMetrics(app: FastifyInstance, ctx: AppContext): void {
  // a callback hook: no promise per request on the path every heartbeat takes
  app.addHook("onResponse", (req, reply, done) => {
    const route = req.routeOptions.url ?? "unmatched";
    httpRequests.labels(route, req.method, String(reply.statusCode)).inc();
    httpDuration.labels(route, req.method).observe(reply.elapsedTime / 1000);
    done();
  });

  const token = ctx.config.metrics.token;
  app.get("/metrics", async (req, reply) => {
    if (!token) {
      const err = new ApiError(
        404,
        "NOT_FOUND",
        "Metrics are not served on the API port: set METRICS_TOKEN to serve them here to a scraper sending it as a bearer token, or METRICS_PORT for a listener of their own (docs/operations.md: Watching Vigil itself).",
      );
      return reply.code(404).send(renderError("envelope", err));
    }
    if (!bearerMatches(req.headers.authorization, token)) {
      const err = new ApiError(
        401,
        "UNAUTHORIZED",
        "Send the metrics token (METRICS_TOKEN) as the header Authorization: Bearer <token>.",
      );
      return reply
        .code(401)
        .header("WWW-Authenticate", 'Bearer realm="vigil-metrics"')
        .send(renderError("envelope", err));
    }
    let text: MetricsBody;
    try {
      text = await metricsText();
    } catch (err) {
      // a worker of --workers N whose primary did not answer: the scrape may be retried, it is no 500
      req.log.warn({ err: (err as Error).message }, "metrics scrape failed");
      const e = unavailable("The metrics could not be gathered; scrape again.");
      return reply.code(503).header("Retry-After", 5).send(renderError("envelope", e));
    }
    return reply.header("Cache-Control", "no-store").type(METRICS_CONTENT_TYPE).send(text);
  });
}
