import { alive, notReady, ready } from "../responses/health.js";
import { defineRoute } from "../route.js";

const base = { tag: "Health", auth: "public", errorStyle: "envelope", status: 200 } as const;

export const healthRoutes = [
  /** The process is alive (a liveness probe; never touches a store). */
  defineRoute({
    ...base,
    method: "GET",
    path: "/healthz",
    summary: "Liveness: the process answers",
    responses: { 200: alive },
    handler: async () => ({ status: "ok" as const }),
  }),
  /** Both stores answer (a readiness probe / load balancer); the 503 names the one that does not. */
  defineRoute({
    ...base,
    method: "GET",
    path: "/readyz",
    summary: "Readiness: both stores answer",
    responses: { 200: ready, 503: notReady },
    handler: async ({ ctx, reply }) => {
      const stores = await ctx.stores.check();
      const failed = Object.entries(stores)
        .filter(([, s]) => !s.ok)
        .map(([name, s]) => `${name} store (${s.backend}): ${s.error}`);
      if (failed.length > 0) {
        reply.code(503);
        return { status: "not_ready" as const, error: `Not ready: ${failed.join("; ")}`, stores };
      }
      return { status: "ready" as const, stores };
    },
  }),
];
