import { type Agent, request } from "undici";
import { type AppContext, perApp } from "../core/context.js";
import { createOutboundAgent, webhookPolicy } from "../lib/outbound.js";
import { describe, WEBHOOK_TIMEOUT_MS } from "../webhooks/send.js";
import { checkWebhookUrl, rulesOf } from "../webhooks/url.js";
import type { ChannelAlert, Provider, ProviderOutcome } from "./providers/types.js";

/** A provider's answer is read up to this many bytes (enough for its error message). */
const MAX_ANSWER_BYTES = 16 * 1024;

/**
 * This app's HTTP agent for channel deliveries, closed with the app: the webhook policy of
 * src/lib/outbound.ts (never link-local or cloud metadata; with PROBE_DENY_PRIVATE no other
 * non-public address, loopback only with WEBHOOK_ALLOW_HTTP_LOOPBACK), checked at connect time.
 */
const channelAgent = perApp((ctx): { agent: Agent; close(): Promise<void> } => {
  const agent = createOutboundAgent({
    policy: webhookPolicy(ctx.config.outbound.denyPrivate, ctx.config.webhooks.allowHttpLoopback),
    // every Slack webhook is one origin (hooks.slack.com), every PagerDuty key another: a burst
    // of alerts to many channels of one provider needs more than a webhook's 4 connections
    connections: 16,
    keepAliveTimeoutMs: 10_000,
    connectTimeoutMs: WEBHOOK_TIMEOUT_MS,
  });
  return { agent, close: () => agent.close() };
});

/** What one attempt at a provider found: the outcome, and the answer's status and first bytes. */
export interface SendResult extends ProviderOutcome {
  status: number | null;
  answer: string;
}

/**
 * Sends one alert through a provider: its request, checked against the outbound rules (a URL the
 * configuration no longer allows is given up), POSTed with a bounded time, the answer read and
 * interpreted. Never throws; no error names a secret (the URL's path is never quoted).
 */
export async function sendThrough(
  ctx: AppContext,
  provider: Provider,
  settings: Record<string, unknown>,
  alert: ChannelAlert,
  timeoutMs = WEBHOOK_TIMEOUT_MS,
): Promise<SendResult> {
  let req;
  try {
    req = provider.request(alert, settings);
  } catch (err) {
    return {
      error: `cannot build the request: ${(err as Error).message}`,
      giveUp: true,
      status: null,
      answer: "",
    };
  }
  try {
    checkWebhookUrl(req.url.href, rulesOf(ctx.config));
  } catch {
    return {
      error: `not sent: ${req.url.origin} is no longer allowed by the outbound rules`,
      giveUp: true,
      status: null,
      answer: "",
    };
  }
  const signal = AbortSignal.timeout(timeoutMs);
  try {
    const res = await request(req.url, {
      method: "POST",
      headers: { "User-Agent": "Vigil/1", ...req.headers },
      body: req.body,
      dispatcher: channelAgent(ctx).agent,
      signal,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    });
    const answer = await readCapped(res.body, signal);
    const outcome = provider.interpret(
      { status: res.statusCode, headers: res.headers, body: answer },
      settings,
    );
    return { ...outcome, status: res.statusCode, answer: answer.slice(0, 500) };
  } catch (err) {
    return { error: describe(err, req.url, timeoutMs, false), status: null, answer: "" };
  }
}

async function readCapped(
  body: AsyncIterable<Buffer> & { destroy(): void },
  signal: AbortSignal,
): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of body) {
      if (signal.aborted) break;
      chunks.push(chunk);
      size += chunk.length;
      if (size >= MAX_ANSWER_BYTES) {
        body.destroy();
        break;
      }
    }
  } catch {
    // a cut answer still has its status
  }
  return Buffer.concat(chunks).subarray(0, MAX_ANSWER_BYTES).toString("utf8");
}
