import type { AlertAccount } from "../notifications/account.js";
import type { PendingNotification } from "../notifications/repository.js";
import type { Queryable, RelationalStore } from "../stores/relational/types.js";
import type { ChannelType } from "./providers/types.js";

/**
 * Every statement on channels, routing rules and escalations (sql/postgres/024_channels.sql).
 * A channel's secret settings are one encrypted JSON object (`secrets_enc`); the rest is plain.
 */

const ofAccount = (a: AlertAccount, param: (v: unknown) => string, alias: string) =>
  a.scope === "organization"
    ? `${alias}.organization_id = ${param(a.id)}`
    : `${alias}.user_id = ${param(a.id)} AND ${alias}.organization_id IS NULL`;

function binder() {
  const params: unknown[] = [];
  return { params, param: (v: unknown) => `$${params.push(v)}` };
}

const json = (v: unknown) => (typeof v === "string" ? (JSON.parse(v) as unknown) : v);

export interface ChannelRow extends Record<string, unknown> {
  id: string;
  user_id: string | null;
  organization_id: string | null;
  type: ChannelType;
  name: string;
  settings: Record<string, unknown>;
  secrets_enc: string | null;
  hint: string;
  signing_secret_enc: string | null;
  created_at: Date;
  updated_at: Date;
}

const CHANNEL_COLUMNS =
  "ch.id, ch.user_id, ch.organization_id, ch.type, ch.name, ch.settings, ch.secrets_enc, ch.hint, ch.signing_secret_enc, ch.created_at, ch.updated_at";

const channelOf = (r: ChannelRow): ChannelRow => ({
  ...r,
  settings: (json(r.settings) ?? {}) as Record<string, unknown>,
});

export async function selectAccountChannels(db: Queryable, a: AlertAccount): Promise<ChannelRow[]> {
  const { params, param } = binder();
  const r = await db.query<ChannelRow>(
    `SELECT ${CHANNEL_COLUMNS} FROM channels ch WHERE ${ofAccount(a, param, "ch")} ORDER BY ch.created_at, ch.id`,
    params,
  );
  return r.rows.map(channelOf);
}

/** The account's channel `id` (locked with `lock`); null when there is none (absent, or another account's). */
export async function selectAccountChannel(
  db: Queryable,
  a: AlertAccount,
  id: string,
  lock = false,
): Promise<ChannelRow | null> {
  const { params, param } = binder();
  const r = await db.query<ChannelRow>(
    `SELECT ${CHANNEL_COLUMNS} FROM channels ch
      WHERE ch.id = ${param(id)} AND ${ofAccount(a, param, "ch")}${lock ? " FOR UPDATE" : ""}`,
    params,
  );
  const row = r.rows[0];
  return row ? channelOf(row) : null;
}

/** One channel by id, for delivery; null once it was deleted. */
export async function selectChannel(db: Queryable, id: string): Promise<ChannelRow | null> {
  const r = await db.query<ChannelRow>(`SELECT ${CHANNEL_COLUMNS} FROM channels ch WHERE ch.id = $1`, [id]);
  const row = r.rows[0];
  return row ? channelOf(row) : null;
}

export async function insertChannel(
  tx: Queryable,
  c: {
    id: string;
    account: AlertAccount;
    type: ChannelType;
    name: string;
    settings: Record<string, unknown>;
    secretsEnc: string | null;
    hint: string;
    signingSecretEnc: string | null;
    at: Date;
  },
): Promise<void> {
  await tx.query(
    `INSERT INTO channels (id, user_id, organization_id, type, name, settings, secrets_enc, hint, signing_secret_enc, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10)`,
    [
      c.id,
      c.account.scope === "user" ? c.account.id : null,
      c.account.scope === "organization" ? c.account.id : null,
      c.type,
      c.name,
      JSON.stringify(c.settings),
      c.secretsEnc,
      c.hint,
      c.signingSecretEnc,
      c.at.toISOString(),
    ],
  );
}

export async function updateChannelRow(
  tx: Queryable,
  c: {
    id: string;
    name: string;
    settings: Record<string, unknown>;
    secretsEnc: string | null;
    hint: string;
    at: Date;
  },
): Promise<void> {
  await tx.query(
    "UPDATE channels SET name = $2, settings = $3, secrets_enc = $4, hint = $5, updated_at = $6 WHERE id = $1",
    [c.id, c.name, JSON.stringify(c.settings), c.secretsEnc, c.hint, c.at.toISOString()],
  );
}

export async function deleteChannelRow(tx: Queryable, id: string): Promise<void> {
  await tx.query("DELETE FROM channels WHERE id = $1", [id]);
}

/** Locks the account's row (its user or organization): adds to it are counted one at a time. */
export async function lockAlertAccount(tx: Queryable, a: AlertAccount): Promise<void> {
  await tx.query(
    a.scope === "organization"
      ? "SELECT 1 FROM organizations WHERE id = $1 FOR NO KEY UPDATE"
      : "SELECT 1 FROM users WHERE id = $1 FOR NO KEY UPDATE",
    [a.id],
  );
}

/** How many channels the account has, with its row locked (counted one add at a time). */
export async function countAccountChannels(tx: Queryable, a: AlertAccount): Promise<number> {
  await lockAlertAccount(tx, a);
  const { params, param } = binder();
  const r = await tx.query<{ n: number | string }>(
    `SELECT count(*) AS n FROM channels ch WHERE ${ofAccount(a, param, "ch")}`,
    params,
  );
  return Number(r.rows[0]?.n ?? 0);
}

/** Gives up the channel's undelivered notifications (it is being deleted); answers them for the timelines. */
export async function giveUpPendingOfChannel(
  tx: Queryable,
  channelId: string,
  reason: string,
): Promise<
  {
    id: string;
    kind: string;
    channel: string;
    incident_id: string | null;
    recipient: string;
    attempts: number;
  }[]
> {
  const r = await tx.query<{
    id: string;
    kind: string;
    channel: string;
    incident_id: string | null;
    recipient: string;
    attempts: number;
  }>(
    `UPDATE notifications SET status = 'failed', last_error = $2
      WHERE channel_id = $1 AND status = 'pending'
      RETURNING id, kind, channel, incident_id, recipient, attempts`,
    [channelId, reason],
  );
  return r.rows;
}

// --- re-encryption (vigil admin reencrypt) ---

export async function allChannelCiphertexts(
  db: Queryable,
): Promise<{ id: string; secrets_enc: string | null; signing_secret_enc: string | null }[]> {
  const r = await db.query<{ id: string; secrets_enc: string | null; signing_secret_enc: string | null }>(
    "SELECT id, secrets_enc, signing_secret_enc FROM channels ORDER BY id",
  );
  return r.rows;
}

export async function replaceChannelCiphertexts(
  db: Queryable,
  c: { id: string; secrets_enc: string | null; signing_secret_enc: string | null },
): Promise<void> {
  await db.query("UPDATE channels SET secrets_enc = $2, signing_secret_enc = $3 WHERE id = $1", [
    c.id,
    c.secrets_enc,
    c.signing_secret_enc,
  ]);
}

// --- routing rules ---

export interface RuleRow extends Record<string, unknown> {
  id: string;
  user_id: string | null;
  organization_id: string | null;
  channel_ids: string[];
  kinds: string[] | null;
  connection_ids: string[] | null;
  send_recoveries: boolean;
  escalate_after_minutes: number | null;
  repeat_every_minutes: number | null;
  escalation_channel_ids: string[];
  created_at: Date;
  updated_at: Date;
}

const RULE_COLUMNS =
  "r.id, r.user_id, r.organization_id, r.channel_ids, r.kinds, r.connection_ids, r.send_recoveries, r.escalate_after_minutes, r.repeat_every_minutes, r.escalation_channel_ids, r.created_at, r.updated_at";

const ruleOf = (r: RuleRow): RuleRow => ({
  ...r,
  channel_ids: json(r.channel_ids) as string[],
  kinds: json(r.kinds) as string[] | null,
  connection_ids: json(r.connection_ids) as string[] | null,
  escalation_channel_ids: (json(r.escalation_channel_ids) ?? []) as string[],
});

export async function selectAccountRules(db: Queryable, a: AlertAccount): Promise<RuleRow[]> {
  const { params, param } = binder();
  const r = await db.query<RuleRow>(
    `SELECT ${RULE_COLUMNS} FROM routing_rules r WHERE ${ofAccount(a, param, "r")} ORDER BY r.created_at, r.id`,
    params,
  );
  return r.rows.map(ruleOf);
}

export async function selectAccountRule(
  db: Queryable,
  a: AlertAccount,
  id: string,
  lock = false,
): Promise<RuleRow | null> {
  const { params, param } = binder();
  const r = await db.query<RuleRow>(
    `SELECT ${RULE_COLUMNS} FROM routing_rules r WHERE r.id = ${param(id)} AND ${ofAccount(a, param, "r")}${lock ? " FOR UPDATE" : ""}`,
    params,
  );
  const row = r.rows[0];
  return row ? ruleOf(row) : null;
}

export interface RuleFields {
  channel_ids: string[];
  kinds: string[] | null;
  connection_ids: string[] | null;
  send_recoveries: boolean;
  escalate_after_minutes: number | null;
  repeat_every_minutes: number | null;
  escalation_channel_ids: string[];
}

const ruleParams = (f: RuleFields) => [
  JSON.stringify(f.channel_ids),
  f.kinds === null ? null : JSON.stringify(f.kinds),
  f.connection_ids === null ? null : JSON.stringify(f.connection_ids),
  f.send_recoveries,
  f.escalate_after_minutes,
  f.repeat_every_minutes,
  JSON.stringify(f.escalation_channel_ids),
];

export async function insertRule(
  tx: Queryable,
  r: { id: string; account: AlertAccount; at: Date } & RuleFields,
): Promise<void> {
  await tx.query(
    `INSERT INTO routing_rules (id, user_id, organization_id, channel_ids, kinds, connection_ids, send_recoveries,
                                escalate_after_minutes, repeat_every_minutes, escalation_channel_ids, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11)`,
    [
      r.id,
      r.account.scope === "user" ? r.account.id : null,
      r.account.scope === "organization" ? r.account.id : null,
      ...ruleParams(r),
      r.at.toISOString(),
    ],
  );
}

export async function updateRuleRow(tx: Queryable, r: { id: string; at: Date } & RuleFields): Promise<void> {
  await tx.query(
    `UPDATE routing_rules SET channel_ids = $2, kinds = $3, connection_ids = $4, send_recoveries = $5,
            escalate_after_minutes = $6, repeat_every_minutes = $7, escalation_channel_ids = $8, updated_at = $9
      WHERE id = $1`,
    [r.id, ...ruleParams(r), r.at.toISOString()],
  );
}

export async function deleteRuleRow(tx: Queryable, id: string): Promise<void> {
  await tx.query("DELETE FROM routing_rules WHERE id = $1", [id]);
}

/** The account's rules that name the channel (as a target or an escalation target). */
export async function rulesNamingChannel(
  tx: Queryable,
  a: AlertAccount,
  channelId: string,
): Promise<string[]> {
  return (await selectAccountRules(tx, a))
    .filter((r) => r.channel_ids.includes(channelId) || r.escalation_channel_ids.includes(channelId))
    .map((r) => r.id);
}

// --- the account's e-mail switch ---

export async function selectAlertEmail(db: Queryable, a: AlertAccount): Promise<boolean> {
  const r = await db.query<{ alert_email: boolean }>(
    a.scope === "organization"
      ? "SELECT alert_email FROM organizations WHERE id = $1"
      : "SELECT alert_email FROM users WHERE id = $1",
    [a.id],
  );
  return r.rows[0]?.alert_email ?? true;
}

export async function updateAlertEmail(db: Queryable, a: AlertAccount, on: boolean): Promise<void> {
  await db.query(
    a.scope === "organization"
      ? "UPDATE organizations SET alert_email = $2 WHERE id = $1"
      : "UPDATE users SET alert_email = $2 WHERE id = $1",
    [a.id, on],
  );
}

// --- escalations ---

export async function insertEscalation(
  tx: Queryable,
  e: { incidentId: string; ruleId: string; nextAt: Date },
): Promise<void> {
  await tx.query(
    `INSERT INTO incident_escalations (incident_id, rule_id, next_at) VALUES ($1, $2, $3)
     ON CONFLICT (incident_id, rule_id) DO NOTHING`,
    [e.incidentId, e.ruleId, e.nextAt.toISOString()],
  );
}

export interface DueEscalation extends Record<string, unknown> {
  incident_id: string;
  rule_id: string;
  next_at: Date;
  steps: number;
  incident_status: string;
  incident_kind: string;
  incident_title: string;
  opened_at: Date;
  connection_id: string;
  connection_name: string;
  user_id: string;
  organization_id: string | null;
}

/** Due escalations, locked (SKIP LOCKED: nodes share them), with their incident. */
export async function claimDueEscalations(tx: Queryable, at: Date, batch: number): Promise<DueEscalation[]> {
  const r = await tx.query<DueEscalation>(
    `SELECT e.incident_id, e.rule_id, e.next_at, e.steps, i.status AS incident_status, i.kind AS incident_kind,
            i.title AS incident_title, i.opened_at, c.id AS connection_id, c.service_name AS connection_name,
            c.user_id, c.organization_id
       FROM incident_escalations e
       JOIN incidents i ON i.id = e.incident_id
       JOIN connections c ON c.id = i.connection_id
      WHERE e.next_at <= $1
      ORDER BY e.next_at LIMIT $2
      FOR UPDATE OF e SKIP LOCKED`,
    [at.toISOString(), batch],
  );
  return r.rows;
}

export async function advanceEscalation(
  tx: Queryable,
  e: { incidentId: string; ruleId: string; nextAt: Date | null },
): Promise<void> {
  if (e.nextAt === null)
    await tx.query("DELETE FROM incident_escalations WHERE incident_id = $1 AND rule_id = $2", [
      e.incidentId,
      e.ruleId,
    ]);
  else
    await tx.query(
      "UPDATE incident_escalations SET next_at = $3, steps = steps + 1 WHERE incident_id = $1 AND rule_id = $2",
      [e.incidentId, e.ruleId, e.nextAt.toISOString()],
    );
}

/** Moves an escalation's next step later without taking it (a maintenance window holds it). */
export async function postponeEscalation(
  tx: Queryable,
  e: { incidentId: string; ruleId: string; nextAt: Date },
): Promise<void> {
  await tx.query("UPDATE incident_escalations SET next_at = $3 WHERE incident_id = $1 AND rule_id = $2", [
    e.incidentId,
    e.ruleId,
    e.nextAt.toISOString(),
  ]);
}

// --- the outbox: which channels already paged an incident ---

/** The paging channels (PagerDuty, Opsgenie) that were sent (or will be) a trigger of the incident, not withheld. */
export async function pagedChannels(tx: Queryable, incidentId: string): Promise<ChannelRow[]> {
  const r = await tx.query<ChannelRow>(
    `SELECT ${CHANNEL_COLUMNS} FROM channels ch
      WHERE ch.type IN ('pagerduty', 'opsgenie')
        AND ch.id IN (SELECT n.channel_id FROM notifications n
                       WHERE n.incident_id = $1 AND n.event = 'trigger' AND n.status <> 'suppressed')
      ORDER BY ch.created_at, ch.id`,
    [incidentId],
  );
  return r.rows.map(channelOf);
}

/** The kind of an incident (null when it is gone). */
export async function incidentKindOf(tx: Queryable, incidentId: string): Promise<string | null> {
  const r = await tx.query<{ kind: string }>("SELECT kind FROM incidents WHERE id = $1", [incidentId]);
  return r.rows[0]?.kind ?? null;
}

/** The accounts of connections, by id (absent ones are left out). */
export async function connectionAccounts(
  db: Queryable,
  ids: readonly string[],
): Promise<Map<string, { user_id: string; organization_id: string | null }>> {
  if (ids.length === 0) return new Map();
  const r = await db.query<{ id: string; user_id: string; organization_id: string | null }>(
    "SELECT id, user_id, organization_id FROM connections WHERE id = ANY($1::text[])",
    [[...ids]],
  );
  return new Map(
    r.rows.map((row) => [row.id, { user_id: row.user_id, organization_id: row.organization_id }]),
  );
}

/** The kinds of incidents, by id. */
export async function incidentKinds(db: Queryable, ids: readonly string[]): Promise<Map<string, string>> {
  if (ids.length === 0) return new Map();
  const r = await db.query<{ id: string; kind: string }>(
    "SELECT id, kind FROM incidents WHERE id = ANY($1::text[])",
    [[...ids]],
  );
  return new Map(r.rows.map((row) => [row.id, row.kind]));
}

/** One rule by id, whatever its account (the escalation job). */
export async function selectRuleById(db: Queryable, id: string): Promise<RuleRow | null> {
  const r = await db.query<RuleRow>(`SELECT ${RULE_COLUMNS} FROM routing_rules r WHERE r.id = $1`, [id]);
  const row = r.rows[0];
  return row ? ruleOf(row) : null;
}

// --- delivery: a lease per channel, then its due rows in order ---

/**
 * Leases up to `channels` channels with due rows of `types` whose lease is free (or ran out), and
 * claims up to `batch` of their due rows, in the order each channel's rows became due: a row is
 * claimed only while no earlier row of its channel waits for a retry, so a channel's alerts go
 * out in order across retries and nodes. The claim counts the attempt and pushes the next one to
 * `until`, as `claimDue` does; leased channels whose rows all wait are released at once.
 */
export async function leaseChannelRows(
  db: Pick<RelationalStore, "transaction">,
  c: { types: readonly string[]; at: Date; until: Date; batch: number; channels: number },
): Promise<{ rows: PendingNotification[]; channels: string[] }> {
  return db.transaction(async (tx) => {
    const leased = await tx.query<{ id: string }>(
      `UPDATE channels SET delivering_until = $3
        WHERE id IN (
          SELECT ch.id FROM channels ch
            JOIN (SELECT n.channel_id, min(n.next_attempt_at) AS oldest FROM notifications n
                   WHERE n.status = 'pending' AND n.channel_id IS NOT NULL AND n.channel = ANY($1::text[])
                     AND n.next_attempt_at <= $2
                   GROUP BY n.channel_id) due ON due.channel_id = ch.id
           WHERE (ch.delivering_until IS NULL OR ch.delivering_until <= $2)
           -- the channel waiting longest first: no channel starves behind busier ones
           ORDER BY due.oldest, ch.id LIMIT $4 FOR UPDATE OF ch SKIP LOCKED)
        RETURNING id`,
      [[...c.types], c.at.toISOString(), c.until.toISOString(), c.channels],
    );
    const ids = leased.rows.map((r) => r.id);
    if (ids.length === 0) return { rows: [], channels: [] };
    const claimed = await tx.query<PendingNotification>(
      `WITH claimed AS (
         UPDATE notifications SET attempts = attempts + 1, next_attempt_at = $3
          WHERE id IN (
            SELECT r.id FROM notifications r
             WHERE r.channel_id = ANY($1::text[]) AND r.status = 'pending' AND r.next_attempt_at <= $2
               AND NOT EXISTS (
                 SELECT 1 FROM notifications p
                  WHERE p.channel_id = r.channel_id AND p.status = 'pending' AND p.next_attempt_at > $2
                    AND (coalesce(p.due_at, p.created_at), p.created_at, p.id)
                      < (coalesce(r.due_at, r.created_at), r.created_at, r.id))
             ORDER BY coalesce(r.due_at, r.created_at), r.created_at, r.id
             LIMIT $4 FOR UPDATE)
          RETURNING ${PENDING_ROW}, coalesce(due_at, created_at) AS due
       )
       SELECT ${PENDING_ROW} FROM claimed ORDER BY due, created_at, id`,
      [ids, c.at.toISOString(), c.until.toISOString(), c.batch],
    );
    const busy = new Set(claimed.rows.map((r) => r.channel_id));
    const idle = ids.filter((id) => !busy.has(id));
    if (idle.length > 0)
      await tx.query("UPDATE channels SET delivering_until = NULL WHERE id = ANY($1::text[])", [idle]);
    return { rows: claimed.rows, channels: ids.filter((id) => busy.has(id)) };
  });
}

/** Ends a delivery run's lease on a channel. */
export async function releaseChannelLease(db: Queryable, id: string): Promise<void> {
  await db.query("UPDATE channels SET delivering_until = NULL WHERE id = $1", [id]);
}

const PENDING_ROW =
  "id, recipient, subject, body, attempts, kind, channel, incident_id, connection_id, anomaly_id, audit_event, webhook_id, channel_id, event, created_at";
