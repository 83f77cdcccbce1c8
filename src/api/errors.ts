/**
 * One error type for every surface. The spec gives two REST bodies:
 *  - `simple`: `{"error": "..."}`, used by the connection and heartbeat endpoints;
 *  - `envelope`: `{"success": false, "error": {"code", "message", "details"}}`, used everywhere else
 *    (including every authentication failure, code INVALID_API_KEY).
 * A route picks its body with `config.errorStyle`; the code and status are the same either way.
 */
export type ErrorStyle = "simple" | "envelope";

export class ApiError extends Error {
  constructor(
    readonly statusCode: number,
    readonly code: string,
    message: string,
    readonly details: Record<string, unknown> = {},
    /** Extra top-level fields for the simple body, e.g. `validation_errors`. */
    readonly extra: Record<string, unknown> = {},
    /** Forces a body style whatever the route uses (authentication and rate-limit errors). */
    readonly style?: ErrorStyle,
  ) {
    super(message);
    this.name = "ApiError";
  }
}

export const badRequest = (message: string, details: Record<string, unknown> = {}) =>
  new ApiError(400, "VALIDATION_ERROR", message, details);
export const notFound = (message: string) => new ApiError(404, "NOT_FOUND", message);
export const forbidden = (message: string) => new ApiError(403, "FORBIDDEN", message);
export const unavailable = (message: string, details: Record<string, unknown> = {}) =>
  new ApiError(503, "SERVICE_UNAVAILABLE", message, details);

export function renderError(routeStyle: ErrorStyle, err: ApiError): Record<string, unknown> {
  const style = err.style ?? routeStyle;
  if (style === "simple") return { error: err.message, ...err.extra };
  return {
    success: false,
    error: { code: err.code, message: err.message, details: err.details },
    ...err.extra,
  };
}
