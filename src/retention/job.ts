import type { AppContext } from "../context.js";
import { availabilityDaily, availabilityMonthly, availabilitySamples } from "../stores/series/tables.js";
import { DAILY_ROLLUP_DAYS, MONTHLY_ROLLUP_YEARS, rawExpiryRules } from "./policy.js";
import { rollUp } from "./rollups.js";

const DAY_MS = 86_400_000;
/** Taken by the node that runs rollups and expiry, so two nodes never rewrite a partition at once. */
export const RETENTION_LOCK = 0x76676c02;

/**
 * Removes what retention no longer keeps: raw availability samples past each connection's plan
 * (README: Retention), daily rollups past 425 days and monthly ones past 6 years. Resolves with
 * the rows removed per table.
 */
export async function expire(ctx: AppContext): Promise<Record<string, number>> {
  const now = ctx.now();
  const series = ctx.stores.series;
  const raw = await series.expire(availabilitySamples, await rawExpiryRules(ctx.stores.db, now));
  const daily = await series.expire(availabilityDaily, [
    { before: new Date(now.getTime() - DAILY_ROLLUP_DAYS * DAY_MS), keep: [] },
  ]);
  const monthsAgo = new Date(now);
  monthsAgo.setUTCFullYear(monthsAgo.getUTCFullYear() - MONTHLY_ROLLUP_YEARS);
  const monthly = await series.expire(availabilityMonthly, [{ before: monthsAgo, keep: [] }]);
  return { availability_samples: raw, availability_daily: daily, availability_monthly: monthly };
}

/**
 * The jobs role's retention loop: rolls availability up every `rollupMs` (5 minutes) and expires
 * old rows every `expireMs` (an hour), the first of each at start. On PostgreSQL one node at a
 * time runs it (an advisory lock); PGlite has one process by construction.
 */
export class RetentionJob {
  private timer?: NodeJS.Timeout;
  private stopped = false;
  private running?: Promise<void>;
  private lastExpire = 0;

  constructor(
    private readonly ctx: AppContext,
    private readonly rollupMs = 5 * 60_000,
    private readonly expireMs = 60 * 60_000,
  ) {}

  start(): void {
    const loop = async () => {
      if (this.stopped) return;
      this.running = this.tick().catch((err) =>
        this.ctx.log.warn({ err: (err as Error).message }, "retention job failed; retrying at the next run"),
      );
      await this.running;
      if (!this.stopped) this.timer = setTimeout(loop, this.rollupMs);
    };
    void loop();
  }

  async tick(): Promise<void> {
    const work = async () => {
      const rolled = await rollUp(this.ctx);
      this.ctx.log.debug(rolled, "availability rolled up");
      if (Date.now() - this.lastExpire >= this.expireMs) {
        const removed = await expire(this.ctx);
        this.lastExpire = Date.now();
        this.ctx.log.info({ removed }, "retention: expired rows removed");
      }
    };
    const db = this.ctx.stores.db;
    if (db.kind === "pglite") return work();
    await db.transaction(async (tx) => {
      const r = await tx.query<{ ok: boolean }>("SELECT pg_try_advisory_xact_lock($1) AS ok", [
        RETENTION_LOCK,
      ]);
      if (r.rows[0]?.ok) await work();
    });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.running;
  }
}
