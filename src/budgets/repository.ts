import type { Queryable } from "../stores/relational/types.js";

/**
 * Every statement of the budgets feature (sql/postgres/013_budgets.sql): the `budgets` rows, the
 * `budget_warnings` sent, the budget warnings' rows in the `notifications` outbox, and the reads
 * of connections, accounts and `budget` incidents the evaluation needs. Each function takes a
 * `Queryable`: the store, or the caller's open transaction.
 */

export type BudgetScope = "connection" | "user" | "organization";
export type WarningLevel = "50" | "80" | "100" | "projected";

export interface BudgetRow extends Record<string, unknown> {
  scope: BudgetScope;
  target_id: string;
  monthly_budget_cents: number;
  over_month: string | null;
  holder_connection_id: string | null;
  checked_at: Date | null;
}

const BUDGET_COLUMNS = "scope, target_id, monthly_budget_cents, over_month, holder_connection_id, checked_at";

export async function selectBudget(
  db: Queryable,
  scope: BudgetScope,
  targetId: string,
): Promise<BudgetRow | undefined> {
  const r = await db.query<BudgetRow>(
    `SELECT ${BUDGET_COLUMNS} FROM budgets WHERE scope = $1 AND target_id = $2`,
    [scope, targetId],
  );
  return r.rows[0];
}

/** The budget row, locked for the caller's transaction: changes and evaluations of one budget take turns. */
export async function lockBudget(
  tx: Queryable,
  scope: BudgetScope,
  targetId: string,
): Promise<BudgetRow | undefined> {
  const r = await tx.query<BudgetRow>(
    `SELECT ${BUDGET_COLUMNS} FROM budgets WHERE scope = $1 AND target_id = $2 FOR UPDATE`,
    [scope, targetId],
  );
  return r.rows[0];
}

/** Sets (or changes) a budget; its over state is left to the evaluation that follows. */
export async function upsertBudget(
  tx: Queryable,
  b: { scope: BudgetScope; targetId: string; cents: number; setBy: string | null; at: Date },
): Promise<void> {
  const column = { connection: "connection_id", user: "user_id", organization: "organization_id" }[b.scope];
  await tx.query(
    `INSERT INTO budgets (scope, target_id, ${column}, monthly_budget_cents, set_by, created_at, updated_at)
     VALUES ($1, $2, $2, $3, $4, $5, $5)
     ON CONFLICT (scope, target_id) DO UPDATE
       SET monthly_budget_cents = EXCLUDED.monthly_budget_cents, set_by = EXCLUDED.set_by,
           updated_at = EXCLUDED.updated_at`,
    [b.scope, b.targetId, b.cents, b.setBy, b.at.toISOString()],
  );
}

/** Removes a budget; returns the removed row (its over state tells which incident it held), if any. */
export async function deleteBudget(
  tx: Queryable,
  scope: BudgetScope,
  targetId: string,
): Promise<BudgetRow | undefined> {
  const r = await tx.query<BudgetRow>(
    `DELETE FROM budgets WHERE scope = $1 AND target_id = $2 RETURNING ${BUDGET_COLUMNS}`,
    [scope, targetId],
  );
  return r.rows[0];
}

/** Records an evaluation: whether the budget is over (in which month, held by which connection's incident). */
export async function recordEvaluation(
  tx: Queryable,
  e: {
    scope: BudgetScope;
    targetId: string;
    overMonth: string | null;
    holder: string | null;
    at: Date;
  },
): Promise<void> {
  await tx.query(
    `UPDATE budgets SET over_month = $3, holder_connection_id = $4, checked_at = $5
      WHERE scope = $1 AND target_id = $2`,
    [e.scope, e.targetId, e.overMonth, e.holder, e.at.toISOString()],
  );
}

/** Whether some budget over in `month` is held by this connection's `budget` incident. */
export async function holdsBudgetIncident(
  tx: Queryable,
  connectionId: string,
  month: string,
): Promise<boolean> {
  const r = await tx.query<{ held: boolean }>(
    `SELECT EXISTS (SELECT 1 FROM budgets WHERE holder_connection_id = $1 AND over_month = $2) AS held`,
    [connectionId, month],
  );
  return r.rows[0]?.held ?? false;
}

/** Budgets to evaluate, least recently evaluated first (never evaluated, or changed, first of all). */
export async function selectDueBudgets(db: Queryable, limit: number): Promise<BudgetRow[]> {
  const r = await db.query<BudgetRow>(
    `SELECT ${BUDGET_COLUMNS} FROM budgets
      ORDER BY checked_at ASC NULLS FIRST, scope, target_id LIMIT $1`,
    [limit],
  );
  return r.rows;
}

/**
 * Records the warning levels not sent yet this month; returns those newly recorded (a level
 * another transaction recorded first is not returned, so each warning is decided once).
 */
export async function recordWarnings(
  tx: Queryable,
  w: {
    scope: BudgetScope;
    targetId: string;
    month: string;
    levels: readonly WarningLevel[];
    connectionId: string | null;
    budgetCents: number;
    spentCents: number;
    at: Date;
  },
): Promise<WarningLevel[]> {
  const recorded: WarningLevel[] = [];
  for (const level of w.levels) {
    const r = await tx.query(
      `INSERT INTO budget_warnings (scope, target_id, month, level, connection_id, budget_cents, spent_cents, sent_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
       ON CONFLICT (scope, target_id, month, level) DO NOTHING`,
      [w.scope, w.targetId, w.month, level, w.connectionId, w.budgetCents, w.spentCents, w.at.toISOString()],
    );
    if (r.rowCount > 0) recorded.push(level);
  }
  return recorded;
}

/** Forgets warnings of months before `month` (`YYYY-MM`). */
export async function deleteWarningsBefore(db: Queryable, month: string): Promise<number> {
  const r = await db.query("DELETE FROM budget_warnings WHERE month < $1", [month]);
  return r.rowCount;
}

/** A connection as budgets and incidents name it. */
export interface ConnectionRef extends Record<string, unknown> {
  id: string;
  service_name: string;
  user_id: string;
  organization_id: string | null;
}

export async function selectConnectionRef(db: Queryable, id: string): Promise<ConnectionRef | undefined> {
  const r = await db.query<ConnectionRef>(
    "SELECT id, service_name, user_id, organization_id FROM connections WHERE id = $1",
    [id],
  );
  return r.rows[0];
}

/** The connections of an account: a user's personal connections, or an organization's. */
export async function selectAccountConnections(
  db: Queryable,
  account: { scope: "user" | "organization"; id: string },
): Promise<ConnectionRef[]> {
  const r =
    account.scope === "user"
      ? await db.query<ConnectionRef>(
          `SELECT id, service_name, user_id, organization_id FROM connections
            WHERE organization_id IS NULL AND user_id = $1 ORDER BY created_at, id`,
          [account.id],
        )
      : await db.query<ConnectionRef>(
          `SELECT id, service_name, user_id, organization_id FROM connections
            WHERE organization_id = $1 ORDER BY created_at, id`,
          [account.id],
        );
  return r.rows;
}

/** How e-mails name an account: the organization's name, or the user's e-mail address. */
export async function selectAccountName(
  db: Queryable,
  account: { scope: "user" | "organization"; id: string },
): Promise<string | undefined> {
  const r =
    account.scope === "user"
      ? await db.query<{ name: string }>("SELECT email AS name FROM users WHERE id = $1", [account.id])
      : await db.query<{ name: string }>("SELECT name FROM organizations WHERE id = $1", [account.id]);
  return r.rows[0]?.name;
}

/**
 * Unresolved `budget` incidents that no budget over in `month` holds any more (a budget removed
 * or raised behind the job's back, or last month's): the job resolves them.
 */
export async function selectUnheldBudgetIncidents(
  db: Queryable,
  month: string,
  limit: number,
): Promise<(ConnectionRef & { opened_at: Date })[]> {
  const r = await db.query<ConnectionRef & { opened_at: Date }>(
    `SELECT c.id, c.service_name, c.user_id, c.organization_id, i.opened_at
       FROM incidents i JOIN connections c ON c.id = i.connection_id
      WHERE i.kind = 'budget' AND i.status <> 'resolved'
        AND NOT EXISTS (SELECT 1 FROM budgets b WHERE b.holder_connection_id = i.connection_id AND b.over_month = $1)
      ORDER BY i.opened_at LIMIT $2`,
    [month, limit],
  );
  return r.rows;
}

/** When the connection's unresolved `budget` incident opened; null when it has none. */
export async function unresolvedBudgetIncident(
  tx: Queryable,
  connectionId: string,
): Promise<{ id: string; opened_at: Date } | null> {
  const r = await tx.query<{ id: string; opened_at: Date }>(
    `SELECT id, opened_at FROM incidents WHERE connection_id = $1 AND kind = 'budget' AND status <> 'resolved'`,
    [connectionId],
  );
  return r.rows[0] ?? null;
}

// --- the running month totals of budgets/watch.ts (sql/postgres/022_budget_running.sql) ---

/** A budget with one connection whose spend counts toward it (one row per connection). */
export interface BudgetCoverage extends Record<string, unknown> {
  scope: BudgetScope;
  target_id: string;
  monthly_budget_cents: number;
  connection_id: string;
}

/** Every budget with the connections it counts: a connection budget its own, an account's all of its. */
export async function selectBudgetCoverage(db: Queryable): Promise<BudgetCoverage[]> {
  const r = await db.query<BudgetCoverage>(
    `SELECT b.scope, b.target_id, b.monthly_budget_cents, c.id AS connection_id
       FROM budgets b JOIN connections c ON
            (b.scope = 'connection' AND c.id = b.target_id)
         OR (b.scope = 'user' AND c.organization_id IS NULL AND c.user_id = b.target_id)
         OR (b.scope = 'organization' AND c.organization_id = b.target_id)`,
  );
  return r.rows.map((row) => ({ ...row, monthly_budget_cents: Number(row.monthly_budget_cents) }));
}

export interface RunningTotal extends Record<string, unknown> {
  scope: BudgetScope;
  target_id: string;
  cents: number;
  reconciled_at: Date | null;
}

/** Adds each budget's cents to its running total of `month` (made when missing); answers the totals. */
export async function addRunning(
  db: Queryable,
  month: string,
  deltas: readonly { scope: BudgetScope; targetId: string; cents: number }[],
): Promise<RunningTotal[]> {
  if (deltas.length === 0) return [];
  const r = await db.query<RunningTotal>(
    `INSERT INTO budget_running AS r (scope, target_id, month, cents)
     SELECT d.scope, d.target_id, $1, d.cents FROM unnest($2::text[], $3::text[], $4::float8[]) AS d (scope, target_id, cents)
     ON CONFLICT (scope, target_id, month) DO UPDATE SET cents = r.cents + EXCLUDED.cents
     RETURNING r.scope, r.target_id, r.cents, r.reconciled_at`,
    [month, deltas.map((d) => d.scope), deltas.map((d) => d.targetId), deltas.map((d) => d.cents)],
  );
  return r.rows.map((row) => ({ ...row, cents: Number(row.cents) }));
}

/** The running total of a budget's month, as last written; undefined when none is kept. */
export async function selectRunning(
  db: Queryable,
  scope: BudgetScope,
  targetId: string,
  month: string,
): Promise<number | undefined> {
  const r = await db.query<{ cents: number }>(
    "SELECT cents FROM budget_running WHERE scope = $1 AND target_id = $2 AND month = $3",
    [scope, targetId, month],
  );
  const row = r.rows[0];
  return row ? Number(row.cents) : undefined;
}

/**
 * Sets a running total to the series store's figure, keeping what processes added since `seen`
 * was read (the store may count some of that too: the total errs high, which costs at most an
 * evaluation that finds nothing new).
 */
export async function reconcileRunning(
  db: Queryable,
  r: { scope: BudgetScope; targetId: string; month: string; cents: number; seen: number; at: Date },
): Promise<void> {
  await db.query(
    `INSERT INTO budget_running AS r (scope, target_id, month, cents, reconciled_at)
     VALUES ($1, $2, $3, $4, $6)
     ON CONFLICT (scope, target_id, month) DO UPDATE
       SET cents = $4 + GREATEST(r.cents - $5, 0), reconciled_at = $6`,
    [r.scope, r.targetId, r.month, r.cents, r.seen, r.at.toISOString()],
  );
}

/** The warning levels recorded for a budget's month (by any process). */
export async function selectWarningLevels(
  db: Queryable,
  scope: BudgetScope,
  targetId: string,
  month: string,
): Promise<WarningLevel[]> {
  const r = await db.query<{ level: WarningLevel }>(
    "SELECT level FROM budget_warnings WHERE scope = $1 AND target_id = $2 AND month = $3",
    [scope, targetId, month],
  );
  return r.rows.map((row) => row.level);
}

/** Forgets running totals of months before `month`. */
export async function deleteRunningBefore(db: Queryable, month: string): Promise<number> {
  const r = await db.query("DELETE FROM budget_running WHERE month < $1", [month]);
  return r.rowCount;
}
