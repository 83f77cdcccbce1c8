/**
 * Failures of the core, independent of any transport. A service verb throws a ServiceError with
 * a code; each door (REST, MCP, the dashboard) maps the code to its own status and body. The
 * message is written for the person who sent the request: it names the field or the thing and
 * says what to do.
 */
export type ErrorCode =
  /** The request is malformed or a field is invalid (`field` names it). */
  | "invalid_input"
  /** No credentials, or credentials that are unknown, expired or revoked. */
  | "unauthenticated"
  /** The caller is known but may not do this, or may not see this thing. */
  | "forbidden"
  | "not_found"
  /** The request conflicts with the current state (already resolved, already exists). */
  | "conflict"
  | "too_large"
  | "rate_limited"
  /** A store or a dependency cannot answer now; nothing was changed; retry later. */
  | "unavailable";

export interface ServiceErrorOptions {
  /** The field or parameter at fault, dotted (`body.base_url`, `query.limit`). */
  field?: string;
  /** Machine-readable facts for the caller (limits, retry hints, per-item problems). */
  details?: Record<string, unknown>;
  /** A narrower reason within the code, e.g. `invalid_cursor`; transports may surface it. */
  reason?: string;
  /** Per-item problems of a batch, `{index, field, message}`; one bad item rejects the batch. */
  items?: { index: number; field: string; message: string }[];
  /** Seconds after which a retry may succeed (rate_limited, unavailable). */
  retryAfter?: number;
}

export class ServiceError extends Error {
  readonly field?: string;
  readonly details: Record<string, unknown>;
  readonly reason?: string;
  readonly items?: { index: number; field: string; message: string }[];
  readonly retryAfter?: number;

  constructor(
    readonly code: ErrorCode,
    message: string,
    opts: ServiceErrorOptions = {},
  ) {
    super(message);
    this.name = "ServiceError";
    this.field = opts.field;
    this.details = opts.details ?? (opts.field ? { field: opts.field } : {});
    this.reason = opts.reason;
    this.items = opts.items;
    this.retryAfter = opts.retryAfter;
  }
}

/** `field: message`, with the field named in the details. */
export const invalidInput = (field: string, message: string, details?: Record<string, unknown>) =>
  new ServiceError("invalid_input", `${field}: ${message}`, { field, details: details ?? { field } });
export const notFound = (message: string) => new ServiceError("not_found", message);
export const forbidden = (message: string) => new ServiceError("forbidden", message);
export const conflict = (message: string) => new ServiceError("conflict", message);
export const unavailable = (message: string, details: Record<string, unknown> = {}, retryAfter?: number) =>
  new ServiceError("unavailable", message, { details, retryAfter });
