import { createHmac, randomBytes } from "node:crypto";
import type { PendingNotification } from "../notifications/repository.js";

/**
 * What a webhook receives (docs/webhooks.md): one JSON object per alert, the same body on every
 * retry of it. `text` is the subject and the message, so a chat tool's incoming webhook (Slack,
 * Mattermost, Rocket.Chat, Discord's `/slack` endpoint) shows the alert as is; the other fields
 * are for programs.
 */
export interface WebhookPayload {
  /** The notification's id: the same on every retry (also the `Vigil-Delivery` header). */
  id: string;
  /** `failure`, `recovery`, `audit`, `budget_warning`, `anomaly` or `slo_burn`. */
  kind: string;
  text: string;
  subject: string;
  body: string;
  connection_id: string | null;
  connection_name: string | null;
  incident_id: string | null;
  anomaly_id: string | null;
  /** For kind `audit`: what happened (`api_key_created`, …). */
  audit_event: string | null;
  /** When Vigil decided to send it. */
  created_at: string;
}

export function payloadOf(n: PendingNotification, connectionName: string | null): WebhookPayload {
  return {
    id: n.id,
    kind: n.kind,
    text: `${n.subject}\n${n.body}`,
    subject: n.subject,
    body: n.body,
    connection_id: n.connection_id,
    connection_name: connectionName,
    incident_id: n.incident_id,
    anomaly_id: n.anomaly_id,
    audit_event: n.audit_event,
    created_at: new Date(n.created_at).toISOString(),
  };
}

/** A new signing secret: `whsec_` and 32 random bytes, base64url. Shown once, stored encrypted. */
export const newSecret = () => `whsec_${randomBytes(32).toString("base64url")}`;

/**
 * The `Vigil-Signature` header of a body sent at `at`: `t=<unix seconds>,v1=<hex HMAC-SHA256>`,
 * the HMAC keyed by the whole secret (`whsec_…` as shown) over `<t>.<raw body>`, as Stripe signs.
 * Signing the time too lets a receiver refuse an old request replayed.
 */
export function signatureHeader(secret: string, body: string, at: Date): string {
  const t = Math.floor(at.getTime() / 1000);
  const v1 = createHmac("sha256", secret).update(`${t}.${body}`).digest("hex");
  return `t=${t},v1=${v1}`;
}
