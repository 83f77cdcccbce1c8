/**
 * The request slots of one probe worker (PROBE_CONCURRENCY): every check holds one while it
 * talks to its platform. A target that hangs holds its slot for the whole timeout, so a few of
 * them could take every slot and make every other connection wait, late for its schedule. To
 * prevent that, checks of connections whose last check failed ("suspects": a platform down,
 * hanging, refusing) may hold at most `total - reserve` slots; the reserve is kept for connections
 * that were fine, which also go first when both wait. A healthy check takes milliseconds, so a
 * small reserve serves many; suspects share the rest and queue among themselves.
 *
 * A check also waits for its platform's origin: the agent keeps at most `perOrigin` connections
 * to one origin (http.ts), and a check's requests go one after another, so more checks of one
 * origin than that in slots would only queue in the agent while holding slots that checks of
 * other origins could use (every workflow_b connection of a region shares Make's one API host).
 * The origin's turn is taken before the slot, so a check waiting for it holds nothing.
 */
export class ProbeSlots {
  private running = 0;
  private runningSuspects = 0;
  private readonly waiting: { healthy: (() => void)[]; suspect: (() => void)[] } = {
    healthy: [],
    suspect: [],
  };
  readonly suspectMax: number;
  /** Checks in slots per origin, and the checks waiting for their origin's turn. */
  private readonly origins = new Map<string, { running: number; waiting: (() => void)[] }>();

  constructor(
    readonly total: number,
    readonly perOrigin = Number.POSITIVE_INFINITY,
  ) {
    // a quarter of the slots (at least one, when there are two or more) never goes to suspects
    this.suspectMax = total >= 2 ? total - Math.max(1, Math.floor(total / 4)) : total;
  }

  /** Runs `fn` in a slot of its class, once one is free and its origin has room. */
  async run<T>(suspect: boolean, fn: () => Promise<T>, origin?: string): Promise<T> {
    if (origin !== undefined) await this.enterOrigin(origin);
    try {
      await this.acquire(suspect);
      try {
        return await fn();
      } finally {
        this.release(suspect);
      }
    } finally {
      if (origin !== undefined) this.leaveOrigin(origin);
    }
  }

  /** Checks of this origin in slots or on their way to one. */
  inOrigin(origin: string): number {
    return this.origins.get(origin)?.running ?? 0;
  }

  private enterOrigin(origin: string): Promise<void> {
    let o = this.origins.get(origin);
    if (!o) this.origins.set(origin, (o = { running: 0, waiting: [] }));
    if (o.running < this.perOrigin && o.waiting.length === 0) {
      o.running++;
      return Promise.resolve();
    }
    const entry = o;
    return new Promise((resolve) => entry.waiting.push(resolve));
  }

  private leaveOrigin(origin: string): void {
    const o = this.origins.get(origin);
    if (!o) return;
    const next = o.waiting.shift();
    // the turn passes straight to the next waiting check of the origin
    if (next) next();
    else if (--o.running === 0) this.origins.delete(origin);
  }

  /** Checks waiting for a slot, per class. */
  get queued(): { healthy: number; suspect: number } {
    return { healthy: this.waiting.healthy.length, suspect: this.waiting.suspect.length };
  }

  private free(suspect: boolean): boolean {
    return this.running < this.total && (!suspect || this.runningSuspects < this.suspectMax);
  }

  private take(suspect: boolean): void {
    this.running++;
    if (suspect) this.runningSuspects++;
  }

  private acquire(suspect: boolean): Promise<void> {
    const queue = suspect ? this.waiting.suspect : this.waiting.healthy;
    // healthy checks pass queued suspects; within a class, first come first served
    const ahead = suspect ? this.waiting.healthy.length + queue.length : queue.length;
    if (ahead === 0 && this.free(suspect)) {
      this.take(suspect);
      return Promise.resolve();
    }
    return new Promise((resolve) => queue.push(resolve));
  }

  private release(suspect: boolean): void {
    this.running--;
    if (suspect) this.runningSuspects--;
    while (this.waiting.healthy.length > 0 && this.free(false)) {
      this.take(false);
      (this.waiting.healthy.shift() as () => void)();
    }
    while (this.waiting.healthy.length === 0 && this.waiting.suspect.length > 0 && this.free(true)) {
      this.take(true);
      (this.waiting.suspect.shift() as () => void)();
    }
  }
}
