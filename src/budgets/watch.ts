import { type AppContext, perApp } from "../core/context.js";
import { budgetChanges } from "./coverage.js";
import { THRESHOLDS } from "./evaluate.js";
import { evaluateBudget } from "./job.js";
import { MIN_PROJECTION_MS, type Month, monthOf, projectToMonthEnd } from "./month.js";
import {
  addRunning,
  type BudgetScope,
  selectBudgetCoverage,
  selectWarningLevels,
  type WarningLevel,
} from "./repository.js";

/**
 * Budgets noticed at ingest (docs/api.md: Budgets). Every process that ingests spend keeps, for the
 * connections some budget counts, what it ingested in the current UTC month; about once a second
 * it adds that to each budget's running total in PostgreSQL (`budget_running`, one statement for
 * all of them) and reads back the total of all processes and nodes. When a total reaches a
 * threshold (50, 80 or 100 % of the budget, or a month-end projection past it) whose warning this
 * month is not recorded yet, the process evaluates that budget as the budget job does, on the
 * series store's figures and under the budget's row lock, so each warning is decided once
 * whichever process sees the crossing first. Nothing is read per request: a heartbeat or usage
 * batch costs a map lookup, and the store is asked only when a budget may have crossed.
 *
 * The running total is a trigger, never the figure a warning states: every evaluation (and the
 * budget job every five minutes) sets it to the store's spend plus what processes added since.
 * Which connections count toward which budget is reloaded every `reloadMs`, and at once in the
 * process that changes a budget (coverage.ts); spend that arrives while the list loads is sorted
 * once it has loaded. A budget set in another process counts here from this process's next
 * reload; meanwhile that process's evaluation and the job's see the store's figures.
 */
export interface BudgetWatchOptions {
  /** How long ingested spend waits before it is added to the running totals. */
  flushMs: number;
  /** How often the list of budgets and their connections is reloaded. */
  reloadMs: number;
  /** The least time between two evaluations of one budget by this process. */
  minEvaluationGapMs: number;
}

export const BUDGET_WATCH_DEFAULTS: BudgetWatchOptions = {
  flushMs: 1_000,
  reloadMs: 5_000,
  minEvaluationGapMs: 2_000,
};

interface Watched {
  scope: BudgetScope;
  targetId: string;
  budgetCents: number;
  /** Levels recorded for `month` (by any process), as last read. */
  recorded: Set<WarningLevel>;
  month: string;
  lastEvaluation: number;
}

const keyOf = (scope: string, targetId: string) => `${scope}/${targetId}`;

export class BudgetWatch {
  /** Connection id to the budgets its spend counts toward. */
  private covering = new Map<string, string[]>();
  private readonly budgets = new Map<string, Watched>();
  /** Budget key to cents ingested here and not yet added to its running total. */
  private pending = new Map<string, number>();
  private pendingMonth = "";
  /** Connection id to cents ingested while the list was loading, for connections it did not hold. */
  private unsorted = new Map<string, number>();
  private loadedAt = Number.NEGATIVE_INFINITY;
  private loading: Promise<void> | null = null;
  private flushTimer: NodeJS.Timeout | null = null;
  private flushing: Promise<void> | null = null;
  private readonly evaluating = new Set<string>();
  /** Budgets that may have crossed while their evaluation ran. */
  private readonly again = new Set<string>();
  private closed = false;
  /** Resolvers waiting, in `close`, for the evaluations under way to end. */
  private readonly idle: (() => void)[] = [];
  /** Budget changes made by this process (coverage.ts), and how many the loaded list includes. */
  private readonly changes: { count: number };
  private loadedChanges = -1;

  constructor(
    private readonly ctx: AppContext,
    private readonly opts: BudgetWatchOptions = BUDGET_WATCH_DEFAULTS,
  ) {
    this.changes = budgetChanges(ctx);
  }

  /**
   * Spend the store has committed: `cents` for a connection at `ts`. Synchronous and cheap; spend
   * of another month than the current one is left to the budget job.
   */
  spent(connectionId: string, cents: number, ts: Date): void {
    if (this.closed) return;
    const now = this.ctx.now().getTime();
    if (now - this.loadedAt >= this.opts.reloadMs || this.changes.count !== this.loadedChanges)
      void this.load();
    const keys = this.covering.get(connectionId);
    // while the list loads, a connection it may add is kept aside and sorted at the flush
    if ((!keys && !this.loading) || !(cents > 0)) return;
    const month = monthOf(ts).label;
    if (month !== monthOf(new Date(now)).label) return;
    if (month !== this.pendingMonth) {
      this.pending = new Map();
      this.unsorted = new Map();
      this.pendingMonth = month;
    }
    if (keys) for (const k of keys) this.pending.set(k, (this.pending.get(k) ?? 0) + cents);
    else this.unsorted.set(connectionId, (this.unsorted.get(connectionId) ?? 0) + cents);
    this.schedule();
  }

  /** A flush in `flushMs`, unless one is scheduled already. */
  private schedule(): void {
    if (this.closed) return;
    this.flushTimer ??= setTimeout(() => {
      this.flushTimer = null;
      this.flush().catch((err: unknown) =>
        this.ctx.log.warn({ err: (err as Error).message }, "budget watch: flush failed; retrying"),
      );
    }, this.opts.flushMs).unref();
  }

  /** Loads which connections count toward which budget (one statement); concurrent calls share it. */
  load(): Promise<void> {
    this.loading ??= (async () => {
      try {
        const changes = this.changes.count;
        const rows = await selectBudgetCoverage(this.ctx.stores.db);
        const covering = new Map<string, string[]>();
        const seen = new Set<string>();
        for (const r of rows) {
          const key = keyOf(r.scope, r.target_id);
          const list = covering.get(r.connection_id);
          if (list) list.push(key);
          else covering.set(r.connection_id, [key]);
          seen.add(key);
          const had = this.budgets.get(key);
          if (had) had.budgetCents = r.monthly_budget_cents;
          else
            this.budgets.set(key, {
              scope: r.scope,
              targetId: r.target_id,
              budgetCents: r.monthly_budget_cents,
              recorded: new Set(),
              month: "",
              lastEvaluation: Number.NEGATIVE_INFINITY,
            });
        }
        for (const key of this.budgets.keys()) if (!seen.has(key)) this.budgets.delete(key);
        this.covering = covering;
        this.loadedAt = this.ctx.now().getTime();
        this.loadedChanges = changes;
      } catch (err) {
        // the store is away: the job still evaluates every budget; try again after reloadMs
        // (not at the next spend: that would be a store query per request while it is away)
        this.loadedAt = this.ctx.now().getTime();
        this.loadedChanges = this.changes.count;
        this.ctx.log.warn({ err: (err as Error).message }, "budget watch: could not load the budgets");
      } finally {
        this.loading = null;
      }
    })();
    return this.loading;
  }

  /** Adds the pending spend to the running totals and evaluates the budgets that may have crossed. */
  flush(): Promise<void> {
    this.flushing ??= this.flushOnce().finally(() => {
      this.flushing = null;
      // spend that came (or was put back) while this flush ran gets its own
      if (this.pending.size > 0 || this.unsorted.size > 0) this.schedule();
    });
    return this.flushing;
  }

  private async flushOnce(): Promise<void> {
    if (this.loading) await this.loading;
    for (const [connectionId, cents] of this.unsorted)
      for (const k of this.covering.get(connectionId) ?? [])
        this.pending.set(k, (this.pending.get(k) ?? 0) + cents);
    this.unsorted = new Map();
    if (this.pending.size === 0) return;
    const batch = this.pending;
    const label = this.pendingMonth;
    this.pending = new Map();
    const deltas = [...batch]
      .map(([key, cents]) => ({ key, cents, b: this.budgets.get(key) }))
      .filter((d): d is { key: string; cents: number; b: Watched } => d.b !== undefined)
      .map(({ key, cents, b }) => ({ key, scope: b.scope, targetId: b.targetId, cents }))
      // every process locks the running rows in the same order (no deadlock between two flushes)
      .sort((x, y) => (x.key < y.key ? -1 : x.key > y.key ? 1 : 0));
    let totals;
    try {
      totals = await addRunning(this.ctx.stores.db, label, deltas);
    } catch (err) {
      // not added: keep it for the next flush (unless the month has turned meanwhile)
      if (label === this.pendingMonth || this.pending.size === 0) {
        this.pendingMonth = label;
        for (const [k, c] of batch) this.pending.set(k, (this.pending.get(k) ?? 0) + c);
      }
      this.ctx.log.warn({ err: (err as Error).message }, "budget watch: running totals not written");
      return;
    }
    const at = this.ctx.now();
    const month = monthOf(at);
    if (month.label !== label) return;
    for (const t of totals) {
      const b = this.budgets.get(keyOf(t.scope, t.target_id));
      if (!b) continue;
      if (b.month !== label) {
        try {
          b.recorded = new Set(await selectWarningLevels(this.ctx.stores.db, b.scope, b.targetId, label));
          b.month = label;
        } catch {
          b.recorded = new Set(); // unknown: evaluate, which reads them under the lock anyway
        }
      }
      // a total never set from the store counts only what processes added since it was made
      const due =
        t.reconciled_at === null ||
        dueLevels(b.budgetCents, t.cents, month, at).some((l) => !b.recorded.has(l));
      if (due) void this.evaluate(b);
    }
  }

  /**
   * Evaluates one budget on the store's figures: one evaluation at a time per budget, at least
   * `minEvaluationGapMs` apart; a crossing seen while one runs gets one more after it (the one
   * running may have read the spend before it).
   */
  private async evaluate(b: Watched): Promise<void> {
    const key = keyOf(b.scope, b.targetId);
    if (this.closed) return;
    if (this.evaluating.has(key)) {
      this.again.add(key);
      return;
    }
    this.evaluating.add(key);
    try {
      const wait = b.lastEvaluation + this.opts.minEvaluationGapMs - this.ctx.now().getTime();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait).unref());
      if (this.closed) return; // shut down while waiting: the budget job evaluates it
      this.again.delete(key);
      b.lastEvaluation = this.ctx.now().getTime();
      const e = await evaluateBudget(this.ctx, { scope: b.scope, target_id: b.targetId });
      const month = monthOf(this.ctx.now()).label;
      b.recorded = new Set(await selectWarningLevels(this.ctx.stores.db, b.scope, b.targetId, month));
      b.month = month;
      if (e && (e.warned.length || e.opened))
        this.ctx.log.info(
          { job: "budget-watch", scope: b.scope, warned: e.warned, opened: !!e.opened },
          "budget crossed at ingest",
        );
    } catch (err) {
      this.ctx.log.warn(
        { err: (err as Error).message },
        "budget watch: evaluation failed; the job will retry",
      );
    } finally {
      this.evaluating.delete(key);
      if (this.again.delete(key) && !this.closed) void this.evaluate(b);
      if (this.evaluating.size === 0) for (const settle of this.idle.splice(0)) settle();
    }
  }

  /** Stops the timer and writes what is pending (on shutdown). */
  async close(): Promise<void> {
    this.closed = true;
    if (this.flushTimer) clearTimeout(this.flushTimer);
    this.flushTimer = null;
    await this.flush().catch(() => {});
    // an evaluation under way still uses the stores, which close after this
    if (this.evaluating.size > 0) await new Promise<void>((r) => this.idle.push(r));
  }
}

/** The levels a month's spend has reached: thresholds, and the projection past the budget. */
export function dueLevels(budgetCents: number, spentCents: number, month: Month, at: Date): WarningLevel[] {
  const levels: WarningLevel[] = [];
  for (const pct of THRESHOLDS)
    if (spentCents >= (budgetCents * pct) / 100) levels.push(String(pct) as WarningLevel);
  if (
    spentCents < budgetCents &&
    at.getTime() - month.start.getTime() >= MIN_PROJECTION_MS &&
    projectToMonthEnd(spentCents, month, at) > budgetCents
  )
    levels.push("projected");
  return levels;
}

/** This process's watch (one per app). */
export const budgetWatch = perApp((ctx) => new BudgetWatch(ctx));
