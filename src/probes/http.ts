import { type Agent, type Dispatcher, errors, util } from "undici";
import { createOutboundAgent, probePolicy, refusedBy, type Resolver } from "../lib/outbound.js";

/**
 * One HTTP request of a check, with every way it can go wrong turned into a value. Redirects
 * are not followed, to any address (a platform that redirects its health or API endpoints is
 * misconfigured; a 3xx is a failed check, `redirect`, and its target is never contacted), the
 * status decides before the body (an error answer's body is drained up to 16 KiB, never
 * buffered), a 2xx body is read only up to `maxBytes`, and the whole exchange (connect, headers,
 * body) is bounded by `timeoutMs`: headers and body timeouts, plus one overall deadline that a
 * slowly dripping body cannot stretch. Where the agent refuses the address (PROBE_DENY_PRIVATE,
 * src/lib/outbound.ts), the check fails with `refused` and the refusal as its error.
 */
export type FailureReason =
  | "timeout"
  | "refused"
  | "connection_refused"
  | "dns"
  | "tls"
  | "connection_reset"
  | "http_status"
  | "redirect"
  | "bad_credentials"
  | "invalid_response"
  | "response_too_large"
  | "network";

export type HttpOutcome =
  | {
      ok: true;
      status: number;
      body: unknown;
      ms: number;
      /** With `prefix`: the answer was longer than `maxBytes`; `body` is its first `maxBytes` as text. */
      truncated?: boolean;
    }
  | {
      ok: false;
      reason: FailureReason;
      error: string;
      status?: number;
      ms: number;
      /** On a 429 or 503: how long the platform asked us to wait (its `Retry-After`), in ms. */
      retryAfterMs?: number;
    };

export interface ProbeHttpOptions {
  headers?: Record<string, string>;
  timeoutMs: number;
  maxBytes?: number;
  /** Parse the body as JSON (a parse failure is `invalid_response`). */
  json?: boolean;
  /**
   * A 2xx answer longer than `maxBytes` is not a failure: its first `maxBytes` come back as text
   * (`truncated: true`), for callers that need only what a body starts with.
   */
  prefix?: boolean;
}

/** A 2xx body is read up to this by default (platform API pages: a few hundred KB at most). */
export const DEFAULT_MAX_BYTES = 1024 * 1024;
/** An error answer's body is drained (for keep-alive) up to this, then the socket is closed. */
const ERROR_BODY_BYTES = 16 * 1024;

export interface ProbeAgentOptions {
  /** PROBE_DENY_PRIVATE: refuse non-public addresses (checked at connect time). */
  denyPrivate?: boolean;
  connectionsPerOrigin?: number;
  /** TCP/TLS connect timeout (the probe timeout). */
  connectTimeoutMs?: number;
  /** Addresses or CIDR ranges allowed whatever PROBE_DENY_PRIVATE says (tests). */
  exempt?: string[];
  /** DNS resolution (default `dns.lookup`; tests give their own). */
  resolve?: Resolver;
}

/** Connections the probe agent keeps to one origin (the checks in slots per origin follow it: slots.ts). */
export const PROBE_CONNECTIONS_PER_ORIGIN = 8;

/**
 * One keep-alive agent for all probes and syncs; connections per origin are bounded, and every
 * new connection passes the outbound policy (src/lib/outbound.ts).
 */
export function createProbeAgent(opts: ProbeAgentOptions = {}): Agent {
  return createOutboundAgent({
    policy: { ...probePolicy(opts.denyPrivate ?? false), exempt: opts.exempt },
    connections: opts.connectionsPerOrigin ?? PROBE_CONNECTIONS_PER_ORIGIN,
    keepAliveTimeoutMs: 30_000,
    connectTimeoutMs: opts.connectTimeoutMs ?? 10_000,
    resolve: opts.resolve,
  });
}

function classify(err: unknown): { reason: FailureReason; error: string } {
  const e = err as {
    code?: string;
    name?: string;
    message?: string;
    cause?: { code?: string; message?: string };
  };
  const refused = refusedBy(err);
  if (refused) return { reason: "refused", error: refused.message };
  const code = e.code ?? e.cause?.code ?? "";
  const message = e.message ?? String(err);
  if (
    e.name === "TimeoutError" ||
    e.name === "AbortError" ||
    err instanceof errors.HeadersTimeoutError ||
    err instanceof errors.BodyTimeoutError ||
    code === "UND_ERR_CONNECT_TIMEOUT"
  )
    return { reason: "timeout", error: "no answer within the check timeout" };
  if (code === "ECONNREFUSED")
    return { reason: "connection_refused", error: `connection refused (${message})` };
  if (code === "ENOTFOUND" || code === "EAI_AGAIN")
    return { reason: "dns", error: `host not found (${message})` };
  if (/CERT|SSL|TLS/i.test(code) || /certificate|tls/i.test(message))
    return { reason: "tls", error: `TLS error (${message})` };
  if (code === "ECONNRESET" || code === "UND_ERR_SOCKET" || err instanceof errors.SocketError)
    return { reason: "connection_reset", error: `connection closed by the platform (${message})` };
  return { reason: "network", error: message };
}

/**
 * `Retry-After` in ms: delta-seconds or an HTTP date (RFC 9110 10.2.3). A 429 without the header
 * waits a minute; the wait is capped at an hour so a wrong header cannot silence a connection.
 */
export function retryAfter(header: string | string[] | undefined, now = Date.now()): number {
  const value = Array.isArray(header) ? header[0] : header;
  let ms = 60_000;
  if (value && /^\s*\d+\s*$/.test(value)) ms = Number(value) * 1000;
  else if (value && Number.isFinite(Date.parse(value))) ms = Date.parse(value) - now;
  return Math.min(Math.max(ms, 1000), 3_600_000);
}

/**
 * The request goes through the agent's `dispatch` with a handler of its own rather than
 * undici's `request()`: no body stream, no async iterator, no abort signal per request. At the
 * probe process's hundreds of requests a second that halves each request's CPU (31 against 69 us
 * on this machine's loopback), with the same rules: the status first, an error answer's body
 * drained up to 16 KiB, a 2xx body up to `maxBytes`, and one overall deadline.
 */
export function probeHttp(agent: Agent, url: string, opts: ProbeHttpOptions): Promise<HttpOutcome> {
  const started = performance.now();
  const ms = () => Math.round((performance.now() - started) * 10) / 10;
  const maxBytes = opts.maxBytes ?? DEFAULT_MAX_BYTES;
  let target: URL;
  try {
    target = new URL(url);
  } catch (err) {
    return Promise.resolve({ ok: false, ...classify(err), ms: ms() });
  }
  return new Promise<HttpOutcome>((resolve) => {
    let settled = false;
    let abort: ((err: Error) => void) | undefined;
    let pendingAbort: Error | undefined;
    let status = 0;
    let headers: Record<string, string | string[] | undefined> = {};
    /** A non-2xx answer: what the check reports once its body is drained (or given up on). */
    let failure: HttpOutcome | undefined;
    const chunks: Buffer[] = [];
    let size = 0;
    const stop = (err: Error) => {
      if (abort) abort(err);
      else pendingAbort = err;
    };
    const settle = (o: HttpOutcome) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(o);
    };
    // The overall deadline: connect, headers and body together; a slowly dripping body cannot stretch it.
    const timer = setTimeout(() => {
      const err = new DOMException("The operation was aborted due to timeout", "TimeoutError");
      // an error answer whose body is still draining is reported as the error it is
      settle(failure ?? { ok: false, ...classify(err), ms: ms() });
      stop(err);
    }, opts.timeoutMs);
    timer.unref();
    const handler: Dispatcher.DispatchHandler = {
      onConnect(abortRequest: (err?: Error) => void) {
        abort = abortRequest;
        if (pendingAbort) abortRequest(pendingAbort);
      },
      onHeaders(statusCode: number, rawHeaders: Buffer[]) {
        status = statusCode;
        if (status >= 200 && status < 300) return true;
        // The status line first: an error answer is what it is, whatever its size, and its body
        // (an HTML error page, a stack trace) is never kept, only drained for keep-alive.
        headers = util.parseHeaders(rawHeaders) as typeof headers;
        if (status >= 300 && status < 400)
          failure = {
            ok: false,
            reason: "redirect",
            error: `HTTP ${status} redirect to ${String(headers.location ?? "?").slice(0, 500)} (redirects are not followed)`,
            status,
            ms: ms(),
          };
        else {
          const wait = status === 429 || status === 503 ? retryAfter(headers["retry-after"]) : undefined;
          failure = {
            ok: false,
            reason: "http_status",
            error: `HTTP ${status}`,
            status,
            ms: ms(),
            ...(wait === undefined ? {} : { retryAfterMs: wait }),
          };
        }
        return true;
      },
      onData(chunk: Buffer) {
        if (settled) return true;
        size += chunk.length;
        if (failure) {
          if (size > ERROR_BODY_BYTES) {
            settle(failure);
            stop(new Error("error answer body too large to drain"));
          }
          return true;
        }
        if (size > maxBytes) {
          if (opts.prefix) {
            chunks.push(chunk);
            const head = Buffer.concat(chunks).subarray(0, maxBytes).toString("utf8");
            settle({ ok: true, status, body: head, ms: ms(), truncated: true });
          } else
            settle({
              ok: false,
              reason: "response_too_large",
              error: `response larger than ${maxBytes} bytes`,
              status,
              ms: ms(),
            });
          stop(new Error("response body too large"));
          return true;
        }
        chunks.push(chunk);
        return true;
      },
      onComplete() {
        if (settled) return;
        if (failure) return settle(failure);
        if (!opts.json) return settle({ ok: true, status, body: null, ms: ms() });
        let body: unknown;
        try {
          body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
        } catch {
          return settle({
            ok: false,
            reason: "invalid_response",
            error: "the answer is not JSON",
            status,
            ms: ms(),
          });
        }
        settle({ ok: true, status, body, ms: ms() });
      },
      onError(err: Error) {
        // while an error answer drains, a broken body changes nothing: the answer was the error
        settle(failure ?? { ok: false, ...classify(err), ms: ms() });
      },
    };
    try {
      agent.dispatch(
        {
          origin: target.origin,
          path: `${target.pathname}${target.search}`,
          method: "GET",
          headers: { accept: "application/json", "user-agent": "vigil-probe", ...opts.headers },
          headersTimeout: opts.timeoutMs,
          bodyTimeout: opts.timeoutMs,
        },
        handler,
      );
    } catch (err) {
      settle({ ok: false, ...classify(err), ms: ms() });
    }
  });
}
