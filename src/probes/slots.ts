/**
 * The request slots of one probe worker (PROBE_CONCURRENCY): every check holds one while it
 * talks to its platform. A target that hangs holds its slot for the whole timeout, so a few of
 * them could take every slot and make every other connection wait, late for its schedule. To
 * prevent that, checks of connections whose last check failed ("suspects": a platform down,
 * hanging, refusing) may hold at most `total - reserve` slots; the reserve is kept for connections
 * that were fine, which also go first when both wait. A healthy check takes milliseconds, so a
 * small reserve serves many; suspects share the rest and queue among themselves.
 */
export class ProbeSlots {
  private running = 0;
  private runningSuspects = 0;
  private readonly waiting: { healthy: (() => void)[]; suspect: (() => void)[] } = {
    healthy: [],
    suspect: [],
  };
  readonly suspectMax: number;

  constructor(readonly total: number) {
    // a quarter of the slots (at least one, when there are two or more) never goes to suspects
    this.suspectMax = total >= 2 ? total - Math.max(1, Math.floor(total / 4)) : total;
  }

  /** Runs `fn` in a slot of its class, once one is free. */
  async run<T>(suspect: boolean, fn: () => Promise<T>): Promise<T> {
    await this.acquire(suspect);
    try {
      return await fn();
    } finally {
      this.release(suspect);
    }
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
