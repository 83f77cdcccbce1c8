/**
 * Batches one kind of statement across concurrent checks: items submitted while a batch is in
 * flight go out together in the next one, and each caller's promise settles with the batch that
 * carried its item, so nothing is acknowledged before the store answered. At 800 checks/s a
 * statement per check costs more of the probe process's CPU than the check's own requests
 * (`vigil bench probes --cpu-prof`); batched, a few statements a second carry them all.
 *
 * With `lingerMs`, a batch waits until its oldest item has waited that long (or the batch is
 * full): under a steady stream of checks the statements in flight otherwise finish so fast that
 * each carries one or two items (450 statements a second for 833 checks a second, measured), and
 * each statement's round trip costs the probe process and PostgreSQL more than its rows.
 *
 * Items with the same key never share a batch (a later one waits for the next), so a statement
 * never sees one row twice. When a batch of several fails, its items are retried one at a time,
 * so one item's failure (a deadlock, a bad value) cannot fail the others'.
 */
export class Batcher<I, O> {
  private queue: { item: I; at: number; resolve: (o: O) => void; reject: (err: unknown) => void }[] = [];
  private inFlight = 0;
  private timer: NodeJS.Timeout | undefined;
  /** Arrivals since `windowStart`, and the rate of the last window that ended (items per second). */
  private arrivals = 0;
  private windowStart = performance.now();
  private rate = 0;

  constructor(
    private readonly opts: {
      /** Runs one batch; answers in the order of `items`. */
      run: (items: I[]) => Promise<O[]>;
      key: (item: I) => string;
      /** Batches in flight at once. */
      maxInFlight: number;
      maxItems: number;
      /** How long the oldest queued item may wait for others to join its batch (default 0). */
      lingerMs?: number;
      /**
       * With this, `lingerMs` applies only while items arrive at least this fast (per second,
       * over the last second or more); slower, a batch waits `slowLingerMs` (default 0). A long
       * linger pays where many items share a batch; where few arrive it only delays them.
       */
      lingerMinRate?: number;
      slowLingerMs?: number;
      /** True when the error means the store cannot be reached (retrying items alone would not help). */
      unreachable?: (err: unknown) => boolean;
    },
  ) {}

  submit(item: I): Promise<O> {
    const now = performance.now();
    if (now - this.windowStart >= 1000) {
      this.rate = (this.arrivals * 1000) / (now - this.windowStart);
      this.arrivals = 0;
      this.windowStart = now;
    }
    this.arrivals++;
    return new Promise<O>((resolve, reject) => {
      this.queue.push({ item, at: now, resolve, reject });
      this.pump();
    });
  }

  /** Whether the queue may go out now; if not, a timer calls pump when its oldest item is due. */
  private due(): boolean {
    const { lingerMinRate } = this.opts;
    const fast = lingerMinRate === undefined || this.rate >= lingerMinRate;
    const linger = (fast ? this.opts.lingerMs : this.opts.slowLingerMs) ?? 0;
    const oldest = this.queue[0];
    if (!oldest || linger <= 0 || this.queue.length >= this.opts.maxItems) return true;
    const wait = oldest.at + linger - performance.now();
    if (wait <= 0) return true;
    if (!this.timer)
      this.timer = setTimeout(() => {
        this.timer = undefined;
        this.pump();
      }, Math.ceil(wait));
    return false;
  }

  private pump(): void {
    while (this.queue.length > 0 && this.inFlight < this.opts.maxInFlight && this.due()) {
      const batch: typeof this.queue = [];
      const rest: typeof this.queue = [];
      const keys = new Set<string>();
      for (const q of this.queue) {
        const k = this.opts.key(q.item);
        if (batch.length < this.opts.maxItems && !keys.has(k)) {
          keys.add(k);
          batch.push(q);
        } else rest.push(q);
      }
      this.queue = rest;
      this.inFlight++;
      void this.send(batch).finally(() => {
        this.inFlight--;
        this.pump();
      });
    }
  }

  private async send(batch: typeof this.queue): Promise<void> {
    try {
      const out = await this.opts.run(batch.map((b) => b.item));
      batch.forEach((b, i) => b.resolve(out[i] as O));
    } catch (err) {
      if (batch.length === 1 || this.opts.unreachable?.(err)) {
        for (const b of batch) b.reject(err);
        return;
      }
      for (const b of batch) {
        try {
          const [o] = await this.opts.run([b.item]);
          b.resolve(o as O);
        } catch (e) {
          b.reject(e);
        }
      }
    }
  }
}
