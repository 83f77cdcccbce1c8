import { type Agent, errors, request } from "undici";
import { createOutboundAgent, refusedBy, type Resolver, webhookPolicy } from "../lib/outbound.js";

/** One delivery attempt's whole exchange (connect, send, answer) is bounded by this. */
export const WEBHOOK_TIMEOUT_MS = 10_000;
/** A receiver's answer is read (and thrown away) up to this many bytes, then the socket is closed. */
const MAX_ANSWER_BYTES = 16 * 1024;

/**
 * A keep-alive agent for webhook deliveries, bounded per origin, whose every connection passes
 * the webhook policy (src/lib/outbound.ts): never a link-local or cloud metadata address; with
 * `denyPrivate` (PROBE_DENY_PRIVATE) no other non-public address either, loopback excepted while
 * `allowHttpLoopback` (WEBHOOK_ALLOW_HTTP_LOOPBACK). Checked at connect time against every DNS
 * answer, so a receiver's name that resolves (or is rebound) there is refused too.
 */
export const createWebhookAgent = (
  opts: { denyPrivate?: boolean; allowHttpLoopback?: boolean; resolve?: Resolver } = {},
): Agent =>
  createOutboundAgent({
    policy: webhookPolicy(opts.denyPrivate ?? false, opts.allowHttpLoopback ?? false),
    connections: 4,
    keepAliveTimeoutMs: 10_000,
    connectTimeoutMs: WEBHOOK_TIMEOUT_MS,
    resolve: opts.resolve,
  });

/**
 * POSTs one webhook body. Answers null when the receiver accepted it (any 2xx) or a short error
 * for the alert history: `HTTP 500`, `HTTP 302 (redirects are not followed)`, `timed out after
 * 10 s`, `connection refused`, `refused: 169.254.169.254 is a cloud metadata address (…)`, … The error names the host at most, never the URL's path or query
 * (they may hold a token). Redirects are never followed (undici's `request` does not), the answer
 * body is drained up to a few KB and ignored. Never throws.
 */
export async function postWebhook(
  agent: Agent,
  url: URL,
  body: string,
  headers: Record<string, string>,
  timeoutMs = WEBHOOK_TIMEOUT_MS,
): Promise<string | null> {
  const signal = AbortSignal.timeout(timeoutMs);
  try {
    const res = await request(url, {
      method: "POST",
      headers,
      body,
      dispatcher: agent,
      signal,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    });
    await res.body.dump({ limit: MAX_ANSWER_BYTES, signal }).catch(() => undefined);
    const status = res.statusCode;
    if (status >= 200 && status < 300) return null;
    if (status >= 300 && status < 400) return `HTTP ${status} (redirects are not followed)`;
    return `HTTP ${status}`;
  } catch (err) {
    return describe(err, url, timeoutMs);
  }
}

/**
 * A failed request in words for the alert history, naming the host at most. `quote`: the
 * library's own message may follow, with the URL cut to its origin; channel deliveries pass false
 * (a Telegram bot token is a path segment that a message could quote in another form).
 */
export function describe(err: unknown, url: URL, timeoutMs: number, quote = true): string {
  // names the host and the address, never the path
  const refused = refusedBy(err);
  if (refused) return refused.message;
  const e = err as { code?: string; name?: string; message?: string; cause?: { code?: string } };
  const code = e.code ?? e.cause?.code ?? "";
  if (
    e.name === "TimeoutError" ||
    e.name === "AbortError" ||
    err instanceof errors.HeadersTimeoutError ||
    err instanceof errors.BodyTimeoutError ||
    code === "UND_ERR_CONNECT_TIMEOUT"
  )
    return `timed out after ${timeoutMs / 1000} s`;
  if (code === "ECONNREFUSED") return `connection refused by ${url.host}`;
  if (code === "ENOTFOUND" || code === "EAI_AGAIN") return `host not found: ${url.hostname}`;
  if (code === "ECONNRESET" || code === "UND_ERR_SOCKET" || err instanceof errors.SocketError)
    return `connection closed by ${url.host}`;
  if (!quote) return `request to ${url.host} failed${code ? ` (${code})` : ""}`;
  const message = (e.message ?? String(err)).split(url.href).join(url.origin);
  return `${code ? `${code}: ` : ""}${message}`.slice(0, 200);
}
