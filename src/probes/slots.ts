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
 * The origin's turn is taken before the slot, so a check waiting for it holds nothing. An
 * origin's turns have the same two lanes: suspects (bad tokens on a shared host, say) never hold
 * all of them, and the origin's healthy checks go first.
 */
export class ProbeSlots {
  private readonly slots: Lanes;
  /** Turns per origin, while any check of the origin holds or waits for one. */
  private readonly origins = new Map<string, Lanes>();

  constructor(
    readonly total: number,
    readonly perOrigin = Number.POSITIVE_INFINITY,
  ) {
    this.slots = new Lanes(total);
  }

  /** At most this many slots (and turns of one origin) go to suspects. */
  get suspectMax(): number {
    return this.slots.suspectMax;
  }

  /** Checks waiting for a slot, per class. */
  get queued(): { healthy: number; suspect: number } {
    return this.slots.queued;
  }

  /** Runs `fn` in a slot of its class, once one is free and its origin has a turn for it. */
  async run<T>(suspect: boolean, fn: () => Promise<T>, origin?: string): Promise<T> {
    let turns: Lanes | undefined;
    if (origin !== undefined && Number.isFinite(this.perOrigin)) {
      turns = this.origins.get(origin);
      if (!turns) this.origins.set(origin, (turns = new Lanes(this.perOrigin)));
      await turns.acquire(suspect);
    }
    try {
      await this.slots.acquire(suspect);
      try {
        return await fn();
      } finally {
        this.slots.release(suspect);
      }
    } finally {
      if (turns && origin !== undefined) {
        turns.release(suspect);
        if (turns.idle) this.origins.delete(origin);
      }
    }
  }

  /** Checks of this origin holding its turns. */
  inOrigin(origin: string): number {
    return this.origins.get(origin)?.held ?? 0;
  }
}

/** `total` places in two lanes: suspects hold at most `suspectMax`, healthy ones go first. */
class Lanes {
  private running = 0;
  private runningSuspects = 0;
  private readonly waiting: { healthy: (() => void)[]; suspect: (() => void)[] } = {
    healthy: [],
    suspect: [],
  };
  readonly suspectMax: number;

  constructor(readonly total: number) {
    // a quarter of the places (at least one, when there are two or more) never goes to suspects
    this.suspectMax = total >= 2 ? total - Math.max(1, Math.floor(total / 4)) : total;
  }

  get held(): number {
    return this.running;
  }

  get idle(): boolean {
    return this.running === 0 && this.waiting.healthy.length === 0 && this.waiting.suspect.length === 0;
  }

  get queued(): { healthy: number; suspect: number } {
    return { healthy: this.waiting.healthy.length, suspect: this.waiting.suspect.length };
  }

  acquire(suspect: boolean): Promise<void> {
    const queue = suspect ? this.waiting.suspect : this.waiting.healthy;
    // healthy checks pass queued suspects; within a class, first come first served
    const ahead = suspect ? this.waiting.healthy.length + queue.length : queue.length;
    if (ahead === 0 && this.free(suspect)) {
      this.take(suspect);
      return Promise.resolve();
    }
    return new Promise((resolve) => queue.push(resolve));
  }

  release(suspect: boolean): void {
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

  private free(suspect: boolean): boolean {
    return this.running < this.total && (!suspect || this.runningSuspects < this.suspectMax);
  }

  private take(suspect: boolean): void {
    this.running++;
    if (suspect) this.runningSuspects++;
  }
}
