import type { FastifyInstance } from "fastify";
import type { AppContext } from "../../context.js";
import { ingestHeartbeat } from "../../ingest/heartbeat.js";
import { HEARTBEAT_BODY_LIMIT, heartbeatBody } from "../../ingest/heartbeat-schema.js";
import { principalOf } from "../auth.js";
import { parseOr400 } from "../validation.js";

/** POST /v1/gateway/ingest: usage-ingestion keys only; errors are `{error}`; 64 KiB at most. */
export async function ingestRoutes(app: FastifyInstance, ctx: AppContext): Promise<void> {
  app.post(
    "/v1/gateway/ingest",
    {
      bodyLimit: HEARTBEAT_BODY_LIMIT,
      config: { errorStyle: "simple", auth: { ingestion: true }, ingest: true },
    },
    async (req, reply) => {
      const body = parseOr400(heartbeatBody, req.body, "body");
      return reply.code(201).send(await ingestHeartbeat(ctx, principalOf(req), body));
    },
  );
}
