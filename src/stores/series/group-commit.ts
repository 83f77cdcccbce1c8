/**
 * Group commit: callers submit batches; while one flush is in flight, later submissions
 * queue up and go out together in the next flush. Each caller's promise settles with the
 * flush that carried its rows, so nothing is acknowledged before the store committed it,
 * and throughput under concurrency comes from batching, not from acknowledging early.
 *
 * When a shared flush fails with a data error (the store rejected some row), the
 * submissions are retried one by one so that one caller's bad batch cannot fail another's.
 */
export interface GroupCommitOptions<T> {
  /** Writes the items durably. */
  flush: (items: T[]) => Promise<void>;
  /** Flushes running at once (default 1). */
  maxInFlight?: number;
  /** Upper bound of items in one flush; a single larger submission still goes out whole. */
  maxItems?: number;
  /** True when the error means the data was rejected (not that the store is unreachable). */
  isDataError?: (err: unknown) => boolean;
  /** Told of every flush once it settled: its rows and whether the store took them. */
  observe?: (rows: number, ok: boolean) => void;
}

interface Submission<T> {
  items: readonly T[];
  resolve: () => void;
  reject: (err: unknown) => void;
}

export class GroupCommit<T> {
  private readonly queue: Submission<T>[] = [];
  private readonly maxInFlight: number;
  private readonly maxItems: number;
  private idleWaiters: (() => void)[] = [];
  private inFlight = 0;
  private unsettled = 0;

  constructor(private readonly opts: GroupCommitOptions<T>) {
    this.maxInFlight = opts.maxInFlight ?? 1;
    this.maxItems = opts.maxItems ?? 50_000;
  }

  submit(items: readonly T[]): Promise<void> {
    if (items.length === 0) return Promise.resolve();
    this.unsettled += items.length;
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ items, resolve, reject });
      this.pump();
    });
  }

  /** Resolves when nothing is queued or in flight. */
  drain(): Promise<void> {
    if (this.queue.length === 0 && this.inFlight === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** Items submitted and not yet settled: queued or in a flush that has not answered. */
  get backlog(): number {
    return this.unsettled;
  }

  private pump(): void {
    while (this.queue.length > 0 && this.inFlight < this.maxInFlight) {
      const group: Submission<T>[] = [];
      let count = 0;
      while (this.queue.length > 0) {
        const next = this.queue[0] as Submission<T>;
        if (group.length > 0 && count + next.items.length > this.maxItems) break;
        group.push(next);
        count += next.items.length;
        this.queue.shift();
      }
      this.inFlight++;
      void this.run(group).finally(() => {
        this.inFlight--;
        if (this.queue.length > 0) this.pump();
        else if (this.inFlight === 0) {
          const waiters = this.idleWaiters;
          this.idleWaiters = [];
          for (const w of waiters) w();
        }
      });
    }
  }

  private async run(group: Submission<T>[]): Promise<void> {
    const items = group.flatMap((s) => s.items);
    try {
      await this.opts.flush(items);
      this.opts.observe?.(items.length, true);
      for (const s of group) this.answer(s, true);
    } catch (err) {
      this.opts.observe?.(items.length, false);
      if (group.length > 1 && this.opts.isDataError?.(err)) {
        for (const s of group) {
          try {
            await this.opts.flush([...s.items]);
            this.opts.observe?.(s.items.length, true);
            this.answer(s, true);
          } catch (e) {
            this.opts.observe?.(s.items.length, false);
            this.answer(s, false, e);
          }
        }
        return;
      }
      for (const s of group) this.answer(s, false, err);
    }
  }

  /** Settles one submission, which leaves the backlog with it. */
  private answer(s: Submission<T>, ok: boolean, err?: unknown): void {
    this.unsettled -= s.items.length;
    if (ok) s.resolve();
    else s.reject(err);
  }
}
