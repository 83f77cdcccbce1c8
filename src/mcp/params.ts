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
 * -32602 (invalid params) naming the field, as JSON-RPC asks; in a batch too (`paramsAnswer`).
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

/**
 * The answer to a POST whose message, or any message of whose batch, has invalid params; null
 * when every message may go to the SDK. A batch is checked whole before any of it runs (as a
 * usage batch is): each invalid request gets its -32602, each other request a -32600 saying it
 * was not run, notifications nothing.
 */
export function paramsAnswer(body: unknown): unknown {
  if (!Array.isArray(body)) return invalidParams(body);
  const answers = body.map(invalidParams);
  const first = answers.findIndex((a) => a !== null);
  if (first < 0) return null;
  return body.flatMap(
    (m: unknown, i): { jsonrpc: "2.0"; id: string | number; error: { code: number; message: string } }[] => {
      const own = answers[i];
      if (own) return [own];
      if (!isJSONRPCRequest(m)) return [];
      return [
        {
          jsonrpc: "2.0",
          id: m.id,
          error: {
            code: RPC.invalidRequest,
            message: `Not run: message ${first} of the batch has invalid params; a batch runs only when every message is valid.`,
          },
        },
      ];
    },
  );
}
