import { type ErrorCode, ServiceError } from "../core/errors.js";

/**
 * The REST error: a status, the envelope's code and message. The core throws ServiceErrors,
 * which `fromServiceError` maps here; the HTTP layer also makes its own (authentication, rate
 * limit, body parsing). One error type for every REST surface. The spec gives two REST bodies:
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
/** A body the API cannot read: it speaks JSON only. */
export const unsupportedMediaType = () =>
  new ApiError(415, "UNSUPPORTED_MEDIA_TYPE", "body: send it as JSON with Content-Type: application/json.");
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

/** REST status and envelope code of each core error code. */
const REST: Record<ErrorCode, { status: number; code: string }> = {
  invalid_input: { status: 400, code: "VALIDATION_ERROR" },
  unauthenticated: { status: 401, code: "INVALID_API_KEY" },
  forbidden: { status: 403, code: "FORBIDDEN" },
  not_found: { status: 404, code: "NOT_FOUND" },
  conflict: { status: 409, code: "CONFLICT" },
  too_large: { status: 413, code: "PAYLOAD_TOO_LARGE" },
  rate_limited: { status: 429, code: "RATE_LIMITED" },
  unavailable: { status: 503, code: "SERVICE_UNAVAILABLE" },
};

/**
 * A core failure as the REST API answers it: the status of its code; the envelope code of its
 * reason when it has one (`invalid_cursor` -> `INVALID_CURSOR`); per-item problems of a batch as
 * the spec's `validation_errors`.
 */
export function fromServiceError(err: ServiceError): ApiError {
  const rest = REST[err.code];
  return new ApiError(
    rest.status,
    err.reason ? err.reason.toUpperCase() : rest.code,
    err.message,
    err.details,
    err.items ? { validation_errors: err.items } : {},
    err.code === "unauthenticated" || err.code === "rate_limited" ? "envelope" : undefined,
  );
}

export { ServiceError };
