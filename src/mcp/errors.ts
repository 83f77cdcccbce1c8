import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import type { FastifyBaseLogger } from "fastify";
import { type ErrorCode, ServiceError } from "../core/errors.js";
import { StoreNotReadyError } from "../stores/supervisor.js";
import { SeriesUnavailableError, SeriesValidationError } from "../stores/series/types.js";

/**
 * The tool server's errors, in one place. A tool that fails answers with a tool error
 * (`isError: true`, one text item an assistant can act on), never a JSON-RPC error or an HTTP
 * 500: the core's ServiceError codes map to texts here, store outages to "retry", anything else
 * to a generic text (logged with the request id; internals never leave).
 */

/** What the failing call was about, so the text can name it. */
export interface ToolCallFacts {
  tool: string;
  /** The connection id the caller asked for, if any. */
  connectionId?: string;
  requestId: string;
}

/** The spec's text for a connection the caller cannot see, whether it exists or not. */
export const connectionNotAccessible = (id: string) =>
  `Connection ${id} was not found or is not accessible to you. Call list_connections to see the connections you can read.`;

const TEXT: Record<ErrorCode, (err: ServiceError, facts: ToolCallFacts) => string> = {
  invalid_input: (err) => `Invalid input: ${err.message}`,
  unauthenticated: () => "Your sign-in is no longer valid. Sign in to Vigil again.",
  forbidden: (err, f) =>
    f.connectionId && err.reason !== "missing_permission"
      ? connectionNotAccessible(f.connectionId)
      : err.message,
  // not found and not visible read the same: an id never reveals whether another tenant has it
  not_found: (err, f) => (f.connectionId ? connectionNotAccessible(f.connectionId) : err.message),
  conflict: (err) => err.message,
  too_large: (err) => err.message,
  rate_limited: (err) => `${err.message}${err.retryAfter ? ` Retry in ${err.retryAfter} s.` : ""}`.trim(),
  unavailable: (err) =>
    `Vigil cannot answer right now: ${err.message}${err.retryAfter ? ` Retry in ${err.retryAfter} s.` : " Retry shortly."}`,
};

const result = (text: string): CallToolResult => ({ content: [{ type: "text", text }], isError: true });

/** A thrown value as the tool error the assistant sees. */
export function toolError(err: unknown, facts: ToolCallFacts, log: FastifyBaseLogger): CallToolResult {
  if (err instanceof ServiceError) return result(TEXT[err.code](err, facts));
  if (err instanceof StoreNotReadyError || err instanceof SeriesUnavailableError) {
    log.warn({ err: err.message, tool: facts.tool }, "mcp tool: store unavailable");
    return result("Vigil's data store is unavailable right now; nothing was read. Retry in a few seconds.");
  }
  if (err instanceof SeriesValidationError) return result(`Invalid input: ${err.message}`);
  log.error({ err, tool: facts.tool }, "mcp tool failed");
  return result(
    `Internal error while running ${facts.tool}; nothing was changed. Retry later; if it persists, report request id ${facts.requestId}.`,
  );
}

/** A ServiceError for a tool the sign-in lacks the permission for (not mapped to "not accessible"). */
export const missingPermission = (permission: string) =>
  new ServiceError("forbidden", `This sign-in does not grant ${permission}; it cannot use this tool.`, {
    reason: "missing_permission",
  });

/** A JSON-RPC error body for the HTTP edge (no request id is known when the body cannot be read). */
export const jsonRpcError = (code: number, message: string) => ({
  jsonrpc: "2.0" as const,
  error: { code, message },
  id: null,
});

/** JSON-RPC 2.0 error codes used at the edge. */
export const RPC = {
  parseError: -32700,
  invalidRequest: -32600,
  invalidParams: -32602,
  internalError: -32603,
  /** Implementation-defined server error (the SDK's own transport errors use it). */
  serverError: -32000,
} as const;
