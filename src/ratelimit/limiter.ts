import type { Logger } from "pino";
import type { RelationalStore } from "../stores/relational/types.js";
import { addToWindow, addToWindows, deleteWindowsBefore, windowKey } from "./repository.js";

export interface RateDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** End of the current window, Unix seconds. */
  reset: number;
}

const HOUR = 3_600_000;

interface ScopeState {
  window: number;
  /** The shared count as of the last sync (every node's requests, ours included). */
  synced: number;
  /** Requests this node admitted since the last sync. */
  pending: number;
  /** Requests this node admitted that a sync is adding to the shared row right now. */
  syncing: number;
  known: boolean;
  first?: Promise<void>;
}

export interface RateLimiterOptions {
  syncMs?: number;
  /** The clock, in ms since the epoch; the app passes its context's clock (`ctx.now`). */
  now?: () => number;
}

/**
 * Fixed one-hour windows per scope (an account), shared by every node through one row per
 * scope and window in Postgres. A node counts locally and adds its count to the shared row
 * about once a second, reading back the total; the first request of a scope in a window
 * waits for one such read, so a node never starts from zero when others already spent the
 * budget. Across N busy nodes the limit can be overshot by at most what they admit in one
 * sync interval. Rejected requests are not counted.
 */
export class RateLimiter {
  private readonly scopes = new Map<string, ScopeState>();
  private readonly syncMs: number;
  private readonly now: () => number;
  private readonly timer: NodeJS.Timeout;
  private lastCleanup = 0;

  constructor(
    private readonly db: () => RelationalStore,
    private readonly log: Logger,
    opts: RateLimiterOptions = {},
  ) {
    this.syncMs = opts.syncMs ?? 1_000;
    this.now = opts.now ?? Date.now;
    // A tick must never take the process down: before the stores are ready db() throws.
    this.timer = setInterval(
      () =>
        void this.syncAll().catch((err: unknown) =>
          this.log.debug({ err: (err as Error).message }, "rate limit sync skipped"),
        ),
      this.syncMs,
    );
    this.timer.unref();
  }

  /**
   * Counts one request of `scope` against `limit`, or refuses it. Answered at once, without a
   * promise, once this node knows the scope's shared count for the window; the first request of
   * a scope in a window waits for it.
   */
  take(scope: string, limit: number): RateDecision | Promise<RateDecision> {
    const window = Math.floor(this.now() / HOUR) * HOUR;
    let st = this.scopes.get(scope);
    if (!st || st.window !== window) {
      st = { window, synced: 0, pending: 0, syncing: 0, known: false };
      this.scopes.set(scope, st);
    }
    if (st.known) return this.decide(st, window, limit);
    const known = st;
    known.first ??= this.sync(scope, known);
    return known.first.then(() => this.decide(known, window, limit));
  }

  private decide(st: ScopeState, window: number, limit: number): RateDecision {
    // what a sync is adding counts too: until its answer, `synced` does not include it
    const used = st.synced + st.syncing + st.pending;
    const reset = (window + HOUR) / 1000;
    if (used >= limit) return { allowed: false, limit, remaining: 0, reset };
    st.pending++;
    return { allowed: true, limit, remaining: Math.max(0, limit - used - 1), reset };
  }

  private async sync(scope: string, st: ScopeState): Promise<void> {
    const n = st.pending;
    st.pending = 0;
    st.syncing += n;
    try {
      const total = await addToWindow(this.db(), scope, new Date(st.window), n);
      st.syncing -= n;
      st.synced = total ?? st.synced + n;
    } catch (err) {
      // Keep counting locally; the count is added on a later sync.
      st.syncing -= n;
      st.pending += n;
      this.log.warn({ err: (err as Error).message, scope }, "rate limit sync failed; counting locally");
    }
    st.known = true;
  }

  /**
   * Pushes every local count to the shared store in one statement (however many scopes are
   * active), reading back each shared total; also run on close.
   */
  async syncAll(): Promise<void> {
    const current = Math.floor(this.now() / HOUR) * HOUR;
    const batch: [string, ScopeState, number][] = [];
    for (const [scope, st] of this.scopes) {
      if (st.pending > 0) batch.push([scope, st, st.pending]);
      else if (st.window < current) this.scopes.delete(scope);
    }
    if (batch.length > 0) {
      for (const [, st, n] of batch) {
        st.pending = 0;
        st.syncing += n;
      }
      try {
        const totals = await addToWindows(
          this.db(),
          batch.map(([scope, st, count]) => ({ scope, windowStart: new Date(st.window), count })),
        );
        for (const [scope, st, n] of batch) {
          st.syncing -= n;
          const total = totals.get(windowKey(scope, new Date(st.window)));
          st.synced = total ?? st.synced + n;
          if (st.window < current) this.scopes.delete(scope);
        }
      } catch (err) {
        for (const [, st, n] of batch) {
          st.syncing -= n;
          st.pending += n;
        }
        this.log.warn(
          { err: (err as Error).message, scopes: batch.length },
          "rate limit sync failed; counting locally",
        );
      }
    }
    if (this.now() - this.lastCleanup > 10 * 60_000) {
      try {
        await deleteWindowsBefore(this.db(), new Date(current - 2 * HOUR));
        this.lastCleanup = this.now();
      } catch {
        // the store is not reachable yet; tried again on a later tick
      }
    }
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.syncAll().catch(() => {});
  }
}
