import type { Queryable } from "../stores/relational/types.js";

/**
 * Every statement on the webhooks table (sql/postgres/016_webhooks.sql). A webhook belongs to a
 * personal account (user_id) or an organization (organization_id); its URL and secret are stored
 * encrypted (`*_enc`), its origin and hint in the clear.
 */

/** An account as webhooks name it: a user's personal account or an organization. */
export type WebhookAccount = { scope: "user" | "organization"; id: string };

/** The SQL condition selecting the account's webhooks, with its bind value appended through `param`. */
const ofAccount = (a: WebhookAccount, param: (v: unknown) => string, alias = "w") =>
  a.scope === "organization"
    ? `${alias}.organization_id = ${param(a.id)}`
    : `${alias}.user_id = ${param(a.id)} AND ${alias}.organization_id IS NULL`;

function binder() {
  const params: unknown[] = [];
  return { params, param: (v: unknown) => `$${params.push(v)}` };
}

export interface WebhookRow extends Record<string, unknown> {
  id: string;
  url_origin: string;
  url_hint: string;
  created_at: Date;
}

/** A webhook with its encrypted URL and secret, for delivery and re-encryption. */
export interface WebhookSecretRow extends WebhookRow {
  url_enc: string;
  secret_enc: string;
}

/**
 * Locks the account's row (its user or organization) for the rest of the transaction, so two
 * webhooks added at once are counted one after the other against the per-account cap. False when
 * the account no longer exists. `FOR NO KEY UPDATE` leaves rows referencing it free to be written.
 */
export async function lockAccount(tx: Queryable, a: WebhookAccount): Promise<boolean> {
  const r = await tx.query(
    a.scope === "organization"
      ? "SELECT 1 FROM organizations WHERE id = $1 FOR NO KEY UPDATE"
      : "SELECT 1 FROM users WHERE id = $1 FOR NO KEY UPDATE",
    [a.id],
  );
  return r.rows.length > 0;
}

/** The account's webhooks with their encrypted URLs, oldest first. */
export async function selectAccountWebhookSecrets(
  db: Queryable,
  a: WebhookAccount,
): Promise<WebhookSecretRow[]> {
  const { params, param } = binder();
  const r = await db.query<WebhookSecretRow>(
    `SELECT w.id, w.url_origin, w.url_hint, w.created_at, w.url_enc, w.secret_enc
       FROM webhooks w WHERE ${ofAccount(a, param)} ORDER BY w.created_at, w.id`,
    params,
  );
  return r.rows;
}

/** The account's webhooks as listed (no URL, no secret), oldest first. */
export async function selectAccountWebhooks(db: Queryable, a: WebhookAccount): Promise<WebhookRow[]> {
  const { params, param } = binder();
  const r = await db.query<WebhookRow>(
    `SELECT w.id, w.url_origin, w.url_hint, w.created_at
       FROM webhooks w WHERE ${ofAccount(a, param)} ORDER BY w.created_at, w.id`,
    params,
  );
  return r.rows;
}

export async function insertWebhook(
  tx: Queryable,
  w: {
    id: string;
    account: WebhookAccount;
    urlEnc: string;
    origin: string;
    hint: string;
    secretEnc: string;
    at: Date;
  },
): Promise<void> {
  await tx.query(
    `INSERT INTO webhooks (id, user_id, organization_id, url_enc, url_origin, url_hint, secret_enc, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
    [
      w.id,
      w.account.scope === "user" ? w.account.id : null,
      w.account.scope === "organization" ? w.account.id : null,
      w.urlEnc,
      w.origin,
      w.hint,
      w.secretEnc,
      w.at.toISOString(),
    ],
  );
}

/**
 * Locks and answers the account's webhook `id`; null when there is none (absent, or another
 * account's: the caller cannot tell them apart).
 */
export async function lockAccountWebhook(
  tx: Queryable,
  a: WebhookAccount,
  id: string,
): Promise<WebhookRow | null> {
  const { params, param } = binder();
  const r = await tx.query<WebhookRow>(
    `SELECT w.id, w.url_origin, w.url_hint, w.created_at FROM webhooks w
      WHERE w.id = ${param(id)} AND ${ofAccount(a, param)} FOR UPDATE`,
    params,
  );
  return r.rows[0] ?? null;
}

export async function deleteWebhookRow(tx: Queryable, id: string): Promise<void> {
  await tx.query("DELETE FROM webhooks WHERE id = $1", [id]);
}

/**
 * Gives up the webhook's notifications not delivered yet (it is being deleted): `failed` with
 * `reason`, so nothing is sent to a URL its owner removed. Answers them, for the incidents' timelines.
 */
export async function giveUpPendingOf(
  tx: Queryable,
  webhookId: string,
  reason: string,
): Promise<{ id: string; kind: string; incident_id: string | null; recipient: string; attempts: number }[]> {
  const r = await tx.query<{
    id: string;
    kind: string;
    incident_id: string | null;
    recipient: string;
    attempts: number;
  }>(
    `UPDATE notifications SET status = 'failed', last_error = $2
      WHERE webhook_id = $1 AND status = 'pending'
      RETURNING id, kind, incident_id, recipient, attempts`,
    [webhookId, reason],
  );
  return r.rows;
}

/** The webhooks of an account for the outbox: one notification row each (notifications/repository.ts). */
export async function webhookTargets(
  tx: Queryable,
  a: WebhookAccount,
): Promise<{ id: string; url_origin: string }[]> {
  const { params, param } = binder();
  const r = await tx.query<{ id: string; url_origin: string }>(
    `SELECT w.id, w.url_origin FROM webhooks w WHERE ${ofAccount(a, param)} ORDER BY w.created_at, w.id`,
    params,
  );
  return r.rows;
}

/** One webhook's encrypted URL and secret, for delivery; null once it was deleted. */
export async function selectWebhookSecret(db: Queryable, id: string): Promise<WebhookSecretRow | null> {
  const r = await db.query<WebhookSecretRow>(
    `SELECT id, url_origin, url_hint, created_at, url_enc, secret_enc FROM webhooks WHERE id = $1`,
    [id],
  );
  return r.rows[0] ?? null;
}

// --- re-encryption (vigil admin reencrypt) ---

export async function allWebhookCiphertexts(
  db: Queryable,
): Promise<{ id: string; url_enc: string; secret_enc: string }[]> {
  const r = await db.query<{ id: string; url_enc: string; secret_enc: string }>(
    "SELECT id, url_enc, secret_enc FROM webhooks ORDER BY id",
  );
  return r.rows;
}

export async function replaceWebhookCiphertexts(
  db: Queryable,
  w: { id: string; url_enc: string; secret_enc: string },
): Promise<void> {
  await db.query("UPDATE webhooks SET url_enc = $2, secret_enc = $3 WHERE id = $1", [
    w.id,
    w.url_enc,
    w.secret_enc,
  ]);
}
