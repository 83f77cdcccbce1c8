import type { OtlpEncoding } from "../../src/otlp/types.js";
import type { TestApp } from "./app.js";
import { CONTENT_TYPE, encodeRequest, type Json } from "./otlp-bodies.js";
import { call } from "./tenants.js";

/**
 * What the OTLP tests do over and over: make a gateway connection, send it an export as its
 * exporter would (through the app's own HTTP handling), and read its usage as a user would.
 */

/** A new gateway connection of the owner's account: its id and usage-ingestion key. */
export async function gatewayConnection(
  ta: TestApp,
  ownerKey: string,
  name: string,
): Promise<{ id: string; key: string }> {
  const res = await call(ta.app, ownerKey, "POST", "/v1/connections", {
    service_type: "gateway",
    service_name: name,
  });
  if (res.statusCode !== 201) throw new Error(`POST /v1/connections: ${res.statusCode} ${res.body}`);
  const b = res.json() as { connection: { id: string }; ingest_api_key: string };
  return { id: b.connection.id, key: b.ingest_api_key };
}

/** POSTs an export body (OTLP JSON form, encoded as asked) with the key; answers the response. */
export function postExport(
  ta: TestApp,
  key: string,
  body: Json,
  { kind = "metrics", encoding = "protobuf" }: { kind?: "metrics" | "traces"; encoding?: OtlpEncoding } = {},
) {
  return ta.app.inject({
    method: "POST",
    url: `/v1/otlp/v1/${kind}`,
    headers: { authorization: `Bearer ${key}`, "content-type": CONTENT_TYPE[encoding] },
    payload: encodeRequest(kind, body, encoding),
  });
}

/** A gateway connection's usage as PUT /v1/usage answers it (once the series store shows it). */
export interface GatewayUsage {
  heartbeats: number;
  input_tokens: number;
  output_tokens: number;
  requests: number;
  cost_cents: number;
  by_model: { model: string; input_tokens: number; output_tokens: number; cost_cents: number }[];
}

export async function gatewayUsageOf(
  ta: TestApp,
  ownerKey: string,
  connectionId: string,
): Promise<GatewayUsage> {
  await ta.ctx.stores.series.waitVisible();
  const res = await call(ta.app, ownerKey, "PUT", `/v1/usage?connection_id=${connectionId}`);
  if (res.statusCode !== 200) throw new Error(`PUT /v1/usage: ${res.statusCode} ${res.body}`);
  const g = (res.json() as { gateway: GatewayUsage | null }).gateway;
  return g ?? { heartbeats: 0, input_tokens: 0, output_tokens: 0, requests: 0, cost_cents: 0, by_model: [] };
}
