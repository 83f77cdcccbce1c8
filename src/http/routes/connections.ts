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
import {
  connection,
  connectionCreated,
  connectionDeleted,
  connectionList,
  connectionUpdated,
} from "../responses/connections.js";
import { defineRoute } from "../route.js";
import { offsetPagination } from "../paging.js";

/** The Connections API: validate, call one verb, answer. Errors are `{error}` (spec: Errors). */
const base = { tag: "Connections", errorStyle: "simple" } as const;

export const connectionRoutes = [
  defineRoute({
    ...base,
    method: "GET",
    path: "/v1/connections",
    summary: "List visible connections, newest first",
    auth: "connections:read",
    query: listConnectionsQuery,
    status: 200,
    responses: { 200: connectionList },
    handler: async ({ ctx, actor, query: q }) => {
      const { service_type: serviceType, organization_id: organizationId, status, limit, offset } = q;
      const filter = { serviceType, organizationId, status, limit, offset };
      const { rows, total } = await listConnections(ctx, actor, filter);
      return { connections: rows, pagination: offsetPagination(total, q, rows.length) };
    },
  }),
  defineRoute({
    ...base,
    method: "POST",
    path: "/v1/connections",
    summary: "Create a connection",
    auth: "connections:write",
    body: createConnectionBody,
    status: 201,
    responses: { 201: connectionCreated },
    handler: ({ ctx, actor, body }) => createConnection(ctx, actor, body),
  }),
  defineRoute({
    ...base,
    method: "GET",
    path: "/v1/connections/:id",
    summary: "One connection",
    auth: "connections:read",
    params: connectionParams,
    status: 200,
    responses: { 200: connection },
    handler: ({ ctx, actor, params }) => getConnection(ctx, actor, params.id),
  }),
  defineRoute({
    ...base,
    method: "PUT",
    path: "/v1/connections/:id",
    summary: "Change the fields given",
    auth: "connections:write",
    params: connectionParams,
    body: updateConnectionBody,
    status: 200,
    responses: { 200: connectionUpdated },
    handler: ({ ctx, actor, params, body }) => updateConnection(ctx, actor, params.id, body),
  }),
  defineRoute({
    ...base,
    method: "DELETE",
    path: "/v1/connections/:id",
    summary: "Delete a connection",
    auth: "connections:delete",
    params: connectionParams,
    status: 200,
    responses: { 200: connectionDeleted },
    handler: ({ ctx, actor, params }) => deleteConnection(ctx, actor, params.id),
  }),
];
