import { forbidden } from "../../core/errors.js";
import { ingestHeartbeat } from "../../ingest/heartbeat.js";
import { HEARTBEAT_BODY_LIMIT, heartbeatBody, parseHeartbeat } from "../../ingest/heartbeat-schema.js";
import { heartbeatRecorded } from "../responses/usage.js";
import { defineRoute } from "../route.js";
import { parseOr400 } from "../validation.js";

export const ingestRoutes = [
  /** Usage-ingestion keys only; errors are `{error}`; 64 KiB at most. */
  defineRoute({
    tag: "Usage",
    method: "POST",
    path: "/v1/gateway/ingest",
    summary: "Gateway heartbeat (usage-ingestion keys only)",
    auth: "usage-ingestion",
    errorStyle: "simple",
    ingest: true,
    bodyLimit: HEARTBEAT_BODY_LIMIT,
    // its answers (the id, or an error naming a field) are always far below 1 KiB
    compress: false,
    body: heartbeatBody,
    // the schema's rules by hand for the common valid body; the schema itself for the rest
    parseBody: (raw) => parseHeartbeat(raw, (b) => parseOr400(heartbeatBody, b, "body")),
    status: 201,
    responses: { 201: heartbeatRecorded },
    handler: async ({ ctx, actor, body }) => {
      // the auth edge lets only ingestion keys through; the check keeps the type honest
      if (actor.type !== "ingestion_key")
        throw forbidden("This endpoint only accepts a key with role usage-ingestion.");
      return ingestHeartbeat(ctx, actor, body);
    },
  }),
];
