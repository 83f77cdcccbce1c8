import type { FastifyInstance } from "fastify";
import type { AppContext } from "../../context.js";

/**
 * /healthz: the process is alive (for a liveness probe; never touches a store).
 * /readyz: both stores answer (for a readiness probe / load balancer); 503 names the one that does not.
 */
export async function healthRoutes(app: FastifyInstance, ctx: AppContext): Promise<void> {
  app.get("/healthz", async () => ({ status: "ok" }));

  app.get("/readyz", async (_req, reply) => {
    const stores = await ctx.stores.check();
    const failed = Object.entries(stores)
      .filter(([, s]) => !s.ok)
      .map(([name, s]) => `${name} store (${s.backend}): ${s.error}`);
    if (failed.length > 0) {
      return reply.code(503).send({ status: "not_ready", error: `Not ready: ${failed.join("; ")}`, stores });
    }
    return { status: "ready", stores };
  });
}
