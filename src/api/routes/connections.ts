import type { FastifyInstance } from "fastify";
import { createConnection } from "../../connections/create.js";
import { getConnection } from "../../connections/get.js";
import { listConnections } from "../../connections/list.js";
import { deleteConnection } from "../../connections/remove.js";
import {
  connectionParams,
  createConnectionBody,
  listConnectionsQuery,
  updateConnectionBody,
} from "../../connections/schema.js";
import { updateConnection } from "../../connections/update.js";
import type { AppContext } from "../../context.js";
import { principalOf } from "../auth.js";
import { parseOr400 } from "../validation.js";

/** The Connections API: thin adapters that validate, call a service verb and answer. Errors are `{error}`. */
export async function connectionRoutes(app: FastifyInstance, ctx: AppContext): Promise<void> {
  const simple = { errorStyle: "simple" } as const;

  app.get(
    "/v1/connections",
    { config: { ...simple, auth: { permission: "connections:read" } } },
    async (req) =>
      listConnections(ctx, principalOf(req), parseOr400(listConnectionsQuery, req.query, "query")),
  );

  app.post(
    "/v1/connections",
    { config: { ...simple, auth: { permission: "connections:write" } } },
    async (req, reply) => {
      const body = parseOr400(createConnectionBody, req.body, "body");
      return reply.code(201).send(await createConnection(ctx, principalOf(req), body));
    },
  );

  app.get(
    "/v1/connections/:id",
    { config: { ...simple, auth: { permission: "connections:read" } } },
    async (req) => {
      const { id } = parseOr400(connectionParams, req.params, "params");
      return getConnection(ctx, principalOf(req), id);
    },
  );

  app.put(
    "/v1/connections/:id",
    { config: { ...simple, auth: { permission: "connections:write" } } },
    async (req) => {
      const { id } = parseOr400(connectionParams, req.params, "params");
      const body = parseOr400(updateConnectionBody, req.body, "body");
      return updateConnection(ctx, principalOf(req), id, body);
    },
  );

  app.delete(
    "/v1/connections/:id",
    { config: { ...simple, auth: { permission: "connections:delete" } } },
    async (req) => {
      const { id } = parseOr400(connectionParams, req.params, "params");
      return deleteConnection(ctx, principalOf(req), id);
    },
  );
}
