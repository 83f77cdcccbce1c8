import type { AppContext } from "../core/context.js";
import { conflict, ServiceError } from "../core/errors.js";
import { smtpMailer } from "../notifications/mailer.js";
import { signatureHeader } from "../webhooks/payload.js";
import { createWebhookAgent, postWebhook } from "../webhooks/send.js";
import { checkWebhookUrl, rulesOf } from "../webhooks/url.js";
import type { ChannelRow } from "./repository.js";
import type { ChannelAlert } from "./providers/types.js";

/**
 * The test send of the two channel types without a provider module: an e-mail channel's goes
 * through SMTP_URL to each address; a webhook channel's is a signed POST like a delivery (kind
 * `test`). A failure is an `unavailable` naming it.
 */
export async function testPlainChannel(
  ctx: AppContext,
  r: ChannelRow,
  settings: Record<string, unknown>,
  alert: ChannelAlert,
): Promise<{ event: string; status: number | null; answer: string }> {
  if (r.type === "email") {
    if (!ctx.config.smtpUrl)
      throw conflict("This server cannot send e-mail: SMTP_URL is not set (see docs/configuration.md)");
    const mailer = smtpMailer(ctx.config.smtpUrl, ctx.config.mailFrom);
    try {
      for (const to of settings.addresses as string[])
        await mailer.send({ id: alert.id, to, subject: alert.subject, text: alert.body });
    } catch (err) {
      throw new ServiceError("unavailable", `The e-mail test send failed: ${(err as Error).message}`, {
        reason: "provider_failed",
      });
    } finally {
      mailer.close();
    }
    return {
      event: "info",
      status: null,
      answer: `sent to ${(settings.addresses as string[]).length} address(es)`,
    };
  }
  const url = checkWebhookUrl(String(settings.url), rulesOf(ctx.config), "settings.url");
  const secret = r.signing_secret_enc ? ctx.credentials.decrypt(r.signing_secret_enc) : "";
  const body = JSON.stringify({
    id: alert.id,
    kind: "test",
    text: `${alert.subject}\n${alert.body}`,
    subject: alert.subject,
    body: alert.body,
    connection_id: null,
    connection_name: null,
    incident_id: null,
    anomaly_id: null,
    audit_event: null,
    created_at: alert.createdAt.toISOString(),
  });
  const agent = createWebhookAgent({
    denyPrivate: ctx.config.outbound.denyPrivate,
    allowHttpLoopback: ctx.config.webhooks.allowHttpLoopback,
  });
  try {
    const error = await postWebhook(agent, url, body, {
      "Content-Type": "application/json",
      "User-Agent": "Vigil-Webhook/1",
      "Vigil-Signature": signatureHeader(secret, body, ctx.now()),
      "Vigil-Delivery": alert.id,
      "Vigil-Attempt": "1",
    });
    if (error !== null)
      throw new ServiceError("unavailable", `The webhook test send failed: ${error}`, {
        reason: "provider_failed",
      });
    return { event: "info", status: 200, answer: "accepted" };
  } finally {
    await agent.close();
  }
}
