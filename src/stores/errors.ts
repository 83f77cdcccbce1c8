export type StoreName = "relational" | "series";

/** Thrown when a request needs a store that is not connected yet. Maps to a 503. */
export class StoreNotReadyError extends Error {
  constructor(
    readonly store: StoreName,
    message = `The ${store} store is not reachable yet; Vigil keeps retrying. Check /readyz.`,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = "StoreNotReadyError";
  }
}

/**
 * A store that was connected stopped answering (its server stopped, restarts, or the network
 * between is down). Like a store not connected yet it maps to a 503 with Retry-After: the request
 * may be retried, and the store's driver reconnects by itself once the server is back. The
 * message is safe to show; the driver's error (addresses, ports) is kept as the cause, for logs.
 */
export class StoreUnavailableError extends StoreNotReadyError {
  constructor(store: StoreName, cause: unknown) {
    super(store, `The ${store} store is unavailable right now; retry shortly. Check /readyz.`, { cause });
    this.name = "StoreUnavailableError";
  }
}

/** Socket-level failures: the server is not there (any more), or not reachable. */
const NETWORK_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ECONNABORTED",
  "EPIPE",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENETDOWN",
  "ENOTFOUND",
  "EAI_AGAIN",
]);

/**
 * SQLSTATEs that mean the server cannot serve this session now, not that the statement is wrong:
 * class 08 (connection exception), 57P01 admin_shutdown (a fast stop terminates sessions),
 * 57P02 crash_shutdown, 57P03 cannot_connect_now (starting up or shutting down), 53300
 * too_many_connections.
 */
const UNAVAILABLE_STATES = new Set(["57P01", "57P02", "57P03", "53300"]);

/** node-postgres' own messages for a connection that died or could not be made (they carry no code). */
const DRIVER_MESSAGES =
  /Connection terminated|connection timeout|timeout exceeded when trying to connect|Client has encountered a connection error|Client was closed|Connection ended/i;

/**
 * Whether a PostgreSQL-protocol driver error means the server is unavailable (retry later), as
 * opposed to a statement the server refused (a bug or bad data, which retrying cannot fix).
 */
export function isConnectionFailure(err: unknown): boolean {
  if (!err || typeof err !== "object") return false;
  const e = err as { code?: unknown; message?: unknown; errors?: unknown };
  const code = typeof e.code === "string" ? e.code : "";
  if (NETWORK_CODES.has(code) || code.startsWith("08") || UNAVAILABLE_STATES.has(code)) return true;
  // connecting to a name with several addresses fails with an AggregateError of socket errors
  if (Array.isArray(e.errors) && e.errors.length > 0 && e.errors.every(isConnectionFailure)) return true;
  return !code && typeof e.message === "string" && DRIVER_MESSAGES.test(e.message);
}
