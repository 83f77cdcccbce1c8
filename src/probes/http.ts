import { type Agent, errors, request } from "undici";
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

/**
 * One keep-alive agent for all probes and syncs; connections per origin are bounded, and every
 * new connection passes the outbound policy (src/lib/outbound.ts).
 */
export function createProbeAgent(opts: ProbeAgentOptions = {}): Agent {
  return createOutboundAgent({
    policy: { ...probePolicy(opts.denyPrivate ?? false), exempt: opts.exempt },
    connections: opts.connectionsPerOrigin ?? 8,
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

export async function probeHttp(agent: Agent, url: string, opts: ProbeHttpOptions): Promise<HttpOutcome> {
  const started = performance.now();
  const ms = () => Math.round((performance.now() - started) * 10) / 10;
  const maxBytes = opts.maxBytes ?? DEFAULT_MAX_BYTES;
  const signal = AbortSignal.timeout(opts.timeoutMs);
  try {
    const res = await request(url, {
      method: "GET",
      headers: { accept: "application/json", "user-agent": "vigil-probe", ...opts.headers },
      dispatcher: agent,
      signal,
      headersTimeout: opts.timeoutMs,
      bodyTimeout: opts.timeoutMs,
    });
    // The status line first: an error answer is what it is, whatever its size, and its body
    // (an HTML error page, a stack trace) is never read.
    const status = res.statusCode;
    if (status < 200 || status >= 300) {
      await res.body.dump({ limit: ERROR_BODY_BYTES, signal }).catch(() => undefined);
      if (status >= 300 && status < 400)
        return {
          ok: false,
          reason: "redirect",
          error: `HTTP ${status} redirect to ${String(res.headers.location ?? "?").slice(0, 500)} (redirects are not followed)`,
          status,
          ms: ms(),
        };
      const wait = status === 429 || status === 503 ? retryAfter(res.headers["retry-after"]) : undefined;
      return {
        ok: false,
        reason: "http_status",
        error: `HTTP ${status}`,
        status,
        ms: ms(),
        ...(wait === undefined ? {} : { retryAfterMs: wait }),
      };
    }
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of res.body) {
      size += (chunk as Buffer).length;
      if (size > maxBytes) {
        res.body.destroy();
        if (opts.prefix) {
          chunks.push(chunk as Buffer);
          const head = Buffer.concat(chunks).subarray(0, maxBytes).toString("utf8");
          return { ok: true, status, body: head, ms: ms(), truncated: true };
        }
        return {
          ok: false,
          reason: "response_too_large",
          error: `response larger than ${maxBytes} bytes`,
          status,
          ms: ms(),
        };
      }
      chunks.push(chunk as Buffer);
    }
    if (!opts.json) return { ok: true, status, body: null, ms: ms() };
    try {
      return { ok: true, status, body: JSON.parse(Buffer.concat(chunks).toString("utf8")), ms: ms() };
    } catch {
      return { ok: false, reason: "invalid_response", error: "the answer is not JSON", status, ms: ms() };
    }
  } catch (err) {
    return { ok: false, ...classify(err), ms: ms() };
  }
}
