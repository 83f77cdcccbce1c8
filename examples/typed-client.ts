/**
 * A typed Vigil client in a few lines: types generated from the server's own OpenAPI document,
 * calls made with openapi-fetch. Every path, parameter, body and answer below is checked by the
 * TypeScript compiler against the document, so a typo or a wrong field fails at build time.
 *
 *   npm install openapi-fetch && npm install -D openapi-typescript typescript
 *   npx openapi-typescript http://localhost:8080/v1/openapi.json -o vigil-api.d.ts
 *
 * then copy this file beside vigil-api.d.ts and call `tour(baseUrl, apiKey)` with an API key that
 * holds connections:read, connections:write, usage:read and usage:write (docs/api.md: API keys, visibility and rate limits).
 * test/api/clients.test.ts runs exactly this file against a running Vigil.
 */
import createClient from "openapi-fetch";
import type { components, paths } from "./vigil-api.js";

export interface Tour {
  connectionId: string;
  listed: boolean;
  availabilitySamples: number;
  usageRecorded: number;
  totalCostCents: number;
}

export async function tour(baseUrl: string, apiKey: string): Promise<Tour> {
  const vigil = createClient<paths>({ baseUrl, headers: { Authorization: `Bearer ${apiKey}` } });

  // create a gateway connection; its configuration is any JSON value
  const configuration: components["schemas"]["JsonValue"] = { fleet: "eu-west", tags: ["prod"] };
  const created = await vigil.POST("/v1/connections", {
    body: { service_type: "gateway", service_name: "Typed client gateway", configuration },
  });
  if (!created.data) throw new Error(`create failed: ${JSON.stringify(created.error)}`);
  const connectionId = created.data.connection.id;

  // list the gateways: `limit` is a number, `service_type` one of the three kinds
  const list = await vigil.GET("/v1/connections", {
    params: { query: { service_type: "gateway", limit: 10 } },
  });
  if (!list.data) throw new Error(`list failed: ${JSON.stringify(list.error)}`);
  const listed = list.data.connections.some((c) => c.id === connectionId);

  // the availability samples stored for it (none yet for a gateway that has sent nothing)
  const availability = await vigil.GET("/v1/availability", {
    params: { query: { connection_id: connectionId, limit: 100 } },
  });
  if (!availability.data) throw new Error(`availability failed: ${JSON.stringify(availability.error)}`);

  // record two usage entries, then read the connection's totals
  const usage = await vigil.POST("/v1/usage", {
    body: [
      { connection_id: connectionId, entity: "gpt-4o", usage_amount: 1200, cost_cents: 3.5 },
      { connection_id: connectionId, entity: "claude-sonnet-4-5", usage_amount: 800, cost_cents: 2 },
    ],
  });
  if (!usage.data) throw new Error(`usage failed: ${JSON.stringify(usage.error)}`);
  const totals = await vigil.PUT("/v1/usage", { params: { query: { connection_id: connectionId } } });
  if (!totals.data) throw new Error(`totals failed: ${JSON.stringify(totals.error)}`);

  return {
    connectionId,
    listed,
    availabilitySamples: availability.data.data.length,
    usageRecorded: usage.data.count,
    totalCostCents: totals.data.totals.cost_cents,
  };
}
