import {
  CallToolRequestSchema,
  InitializeRequestSchema,
  isJSONRPCRequest,
  ListToolsRequestSchema,
  PingRequestSchema,
} from "@modelcontextprotocol/sdk/types.js";
import { RPC } from "./errors.js";

/**
 * The SDK answers a request whose `params` do not fit its method with -32603 (internal error)
 * and a dump of schema issues. The tool server checks the methods it serves first and answers
 * -32602 (invalid params) naming the field, as JSON-RPC asks.
 */
const SCHEMAS = new Map<string, { safeParse: (v: unknown) => ParseResult }>([
  ["initialize", InitializeRequestSchema],
  ["ping", PingRequestSchema],
  ["tools/list", ListToolsRequestSchema],
  ["tools/call", CallToolRequestSchema],
]);

type ParseResult =
  { success: true } | { success: false; error: { issues: { path: PropertyKey[]; message: string }[] } };

/** The JSON-RPC error answer for one request message with invalid params, or null when it is fine. */
export function invalidParams(message: unknown) {
  if (!isJSONRPCRequest(message)) return null;
  const schema = SCHEMAS.get(message.method);
  if (!schema) return null;
  const parsed = schema.safeParse(message);
  if (parsed.success) return null;
  const problems = parsed.error.issues
    .map((i) => `${i.path.map(String).join(".") || "request"}: ${i.message}`)
    .join("; ");
  return {
    jsonrpc: "2.0" as const,
    id: message.id,
    error: { code: RPC.invalidParams, message: `Invalid params for ${message.method}: ${problems}` },
  };
}
