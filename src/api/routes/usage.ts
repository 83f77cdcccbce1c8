import type { FastifyInstance } from "fastify";
import type { AppContext } from "../../context.js";
import { listUsage } from "../../usage/list.js";
import { recordUsage, validateUsageBody } from "../../usage/record.js";
import { listUsageQuery, usageTotalsQuery } from "../../usage/schema.js";
import { usageTotals } from "../../usage/totals.js";
import { principalOf } from "../auth.js";
import { parseOr400 } from "../validation.js";

/** The Usage API. Errors use the envelope; a batch validation failure adds `validation_errors`. */
export async function usageRoutes(app: FastifyInstance, ctx: AppContext): Promise<void> {
  app.post(
    "/v1/usage",
    { config: { auth: { permission: "usage:write" }, ingest: true } },
    async (req, reply) => {
      const entries = validateUsageBody(req.body);
      return reply.code(201).send(await recordUsage(ctx, principalOf(req), entries));
    },
  );

  app.get("/v1/usage", { config: { auth: { permission: "usage:read" } } }, async (req) =>
    listUsage(ctx, principalOf(req), parseOr400(listUsageQuery, req.query, "query")),
  );

  // The spec puts the totals on PUT; they read only.
  app.put("/v1/usage", { config: { auth: { permission: "usage:read" } } }, async (req) =>
    usageTotals(ctx, principalOf(req), parseOr400(usageTotalsQuery, req.query, "query")),
  );
}
