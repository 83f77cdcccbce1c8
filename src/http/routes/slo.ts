import { connectionParams } from "../../connections/schema.js";
import { getSlo, putSlo, removeSlo } from "../../slo/slo.js";
import { MAX_OBJECTIVE, MIN_OBJECTIVE, sloBody, validateSloBody, WINDOW_DAYS } from "../../slo/schema.js";
import { sloRemoved, sloStatus } from "../responses/slo.js";
import { defineRoute } from "../route.js";

/** Service level objectives per connection (docs/api.md: SLOs); the connection endpoints' `{error}`. */
const tag = "SLOs";

export const sloRoutes = [
  defineRoute({
    tag,
    errorStyle: "simple",
    method: "PUT",
    path: "/v1/connections/:id/slo",
    summary: "Set or replace a connection's SLO",
    description: `Body: {"objective": <${MIN_OBJECTIVE} to ${MAX_OBJECTIVE}>, "window_days": <${WINDOW_DAYS.join(", ")}>}. Answers the SLO with its error budget and burn rates, as GET.`,
    auth: "connections:write",
    params: connectionParams,
    body: sloBody,
    parseBody: validateSloBody,
    status: 200,
    responses: { 200: sloStatus },
    handler: ({ ctx, actor, params, body }) => putSlo(ctx, actor, params.id, body),
  }),
  defineRoute({
    tag,
    errorStyle: "simple",
    method: "GET",
    path: "/v1/connections/:id/slo",
    summary: "A connection's SLO, error budget and burn rates",
    description:
      "The SLI is the connection's availability from Vigil's own samples, maintenance left out. Every field but connection_id is null when no SLO is set.",
    auth: "connections:read",
    params: connectionParams,
    status: 200,
    responses: { 200: sloStatus },
    handler: ({ ctx, actor, params }) => getSlo(ctx, actor, params.id),
  }),
  defineRoute({
    tag,
    errorStyle: "simple",
    method: "DELETE",
    path: "/v1/connections/:id/slo",
    summary: "Remove a connection's SLO",
    auth: "connections:write",
    params: connectionParams,
    status: 200,
    responses: { 200: sloRemoved },
    handler: ({ ctx, actor, params }) => removeSlo(ctx, actor, params.id),
  }),
];
