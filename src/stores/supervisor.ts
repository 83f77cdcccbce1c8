import type { Logger } from "pino";
import type { Config } from "../config.js";
import { StoreNotReadyError, type StoreName, StoreUnavailableError } from "./errors.js";
import { openRelational, openSeries, type Stores } from "./index.js";
import { DataDirLockedError } from "./relational/dir-lock.js";
import { MigrationError, migrate } from "./relational/migrate.js";
import type { RelationalStore } from "./relational/types.js";
import { SeriesUnavailableError, type SeriesStore } from "./series/types.js";

export { StoreNotReadyError, StoreUnavailableError, type StoreName } from "./errors.js";

export interface StoreStatus {
  backend: string;
  ok: boolean;
  error?: string;
}

const isOutage = (err: unknown) => err instanceof StoreNotReadyError || err instanceof SeriesUnavailableError;

/**
 * The store with every method call watched: a call that fails because the store is unavailable
 * (StoreNotReadyError and its StoreUnavailableError, SeriesUnavailableError) reports `down`
 * before the error goes on to the caller; a call that resolves reports `up`.
 */
function watched<T extends object>(store: T, report: { down(): void; up(): void }): T {
  const wrapped = new Map<PropertyKey, unknown>();
  return new Proxy(store, {
    get(target, prop, receiver) {
      const value: unknown = Reflect.get(target, prop, receiver);
      if (typeof value !== "function") return value;
      let fn = wrapped.get(prop);
      if (!fn) {
        const method = value as (...args: unknown[]) => unknown;
        fn = (...args: unknown[]) => {
          let out: unknown;
          try {
            out = method.apply(target, args);
          } catch (err) {
            if (isOutage(err)) report.down();
            throw err;
          }
          if (!(out instanceof Promise)) return out;
          return out.then(
            (v: unknown) => {
              report.up();
              return v;
            },
            (err: unknown) => {
              if (isOutage(err)) report.down();
              throw err;
            },
          );
        };
        wrapped.set(prop, fn);
      }
      return fn;
    },
  });
}

/** A span in which a store was unavailable, wall-clock ms; `to` unset while it lasts. */
interface Outage {
  from: number;
  to?: number;
}

/** Outages closer than this are one (a call begun before the outage can succeed inside it). */
const OUTAGE_MERGE_MS = 2_000;
/** Outages are remembered this long (longer than any heartbeat interval plus grace). */
const OUTAGE_MEMORY_MS = 3 * 86_400_000;

/**
 * What this process has seen of its stores' availability: each outage runs from the first call
 * that found a store unavailable to the next call to that store that succeeded.
 */
class OutageLog {
  private readonly spans: Record<StoreName, Outage[]> = { relational: [], series: [] };

  down(store: StoreName, at = Date.now()): void {
    const list = this.spans[store];
    const last = list[list.length - 1];
    if (last && last.to === undefined) return;
    if (last && last.to !== undefined && at - last.to < OUTAGE_MERGE_MS) delete last.to;
    else list.push({ from: at });
    while (
      list.length > 1000 ||
      (list[0]?.to !== undefined && (list[0].to as number) < at - OUTAGE_MEMORY_MS)
    )
      list.shift();
  }

  up(store: StoreName, at = Date.now()): void {
    const last = this.spans[store][this.spans[store].length - 1];
    if (last && last.to === undefined) last.to = at;
  }

  /** Ms of [from, to] in which either store was unavailable. */
  within(from: number, to: number, now = Date.now()): number {
    const spans = [...this.spans.relational, ...this.spans.series]
      .map((o) => [Math.max(from, o.from), Math.min(to, o.to ?? now)] as const)
      .filter(([a, b]) => b > a)
      .sort((x, y) => x[0] - y[0]);
    let total = 0;
    let end = -Infinity;
    for (const [a, b] of spans) {
      if (b <= end) continue;
      total += b - Math.max(a, end);
      end = b;
    }
    return total;
  }
}

/** What /readyz and the log say of a failure: the driver's own words (StoreUnavailableError keeps them as its cause). */
const detail = (err: unknown): string => {
  const e = err instanceof StoreUnavailableError && err.cause instanceof Error ? err.cause : err;
  return (e as Error)?.message || String(e);
};

/** Errors that retrying cannot fix: the process should stop and say why. */
const isFatal = (err: unknown) => err instanceof DataDirLockedError || err instanceof MigrationError;

/**
 * Opens the stores in the background and keeps retrying while they are unreachable, so
 * `vigil serve` starts listening at once: /healthz answers, /readyz says which store is
 * missing, and requests that need a store get a 503 until it is there.
 */
export class StoreSupervisor {
  private relational?: RelationalStore;
  private seriesStore?: SeriesStore;
  private lastError: Partial<Record<StoreName, string>> = {};
  private stopped = false;
  private wake?: () => void;
  private readyWaiters: (() => void)[] = [];
  private readonly outages = new OutageLog();
  readonly backends: Record<StoreName, string>;

  constructor(
    private readonly config: Config,
    private readonly log: Logger,
    private readonly onFatal: (err: Error) => void,
  ) {
    this.backends = {
      relational: config.databaseUrl ? "postgres" : "pglite",
      series: config.questdb ? "questdb" : config.databaseUrl ? "postgres" : "pglite",
    };
  }

  /** For tests and the admin command: wrap stores that are already open. */
  static ready(stores: Stores, log: Logger, config: Config): StoreSupervisor {
    const s = new StoreSupervisor(config, log, () => {});
    s.relational = s.watch(stores.db, "relational");
    s.seriesStore = s.watch(stores.series, "series");
    return s;
  }

  private watch<T extends object>(store: T, name: StoreName): T {
    return watched(store, { down: () => this.outages.down(name), up: () => this.outages.up(name) });
  }

  get db(): RelationalStore {
    if (!this.relational) {
      this.outages.down("relational");
      throw new StoreNotReadyError("relational");
    }
    return this.relational;
  }

  get series(): SeriesStore {
    if (!this.seriesStore) {
      this.outages.down("series");
      throw new StoreNotReadyError("series");
    }
    return this.seriesStore;
  }

  /**
   * How many ms of the wall-clock span [from, to] this process found a store unavailable: from
   * a call that failed because its server was unreachable (or not connected yet) to the next call
   * that succeeded. Detectors that judge silence (the missed-heartbeat monitor) leave that time
   * out: heartbeats Vigil itself could not take are not held against the sender.
   */
  outageWithin(from: number, to: number): number {
    return this.outages.within(from, to);
  }

  get isReady(): boolean {
    return Boolean(this.relational && this.seriesStore);
  }

  whenReady(): Promise<void> {
    if (this.isReady) return Promise.resolve();
    return new Promise((r) => this.readyWaiters.push(r));
  }

  /** Starts connecting; returns at once. */
  start(): void {
    void this.loop();
  }

  private async loop(): Promise<void> {
    let delay = 500;
    while (!this.stopped && !this.isReady) {
      try {
        if (!this.relational) {
          const db = await openRelational(this.config, (err) =>
            this.log.warn({ err: err.message }, "postgres connection error"),
          );
          try {
            const applied = await migrate(db, {
              onApplied: (m) => this.log.info({ migration: m.version }, "migration applied"),
            });
            if (applied.length === 0) this.log.debug("migrations up to date");
          } catch (err) {
            await db.close().catch(() => {});
            throw err;
          }
          this.relational = this.watch(db, "relational");
          delete this.lastError.relational;
          this.log.info({ backend: this.backends.relational }, "relational store ready");
        }
        if (!this.seriesStore) {
          this.seriesStore = this.watch(await openSeries(this.config, this.relational), "series");
          delete this.lastError.series;
          this.log.info({ backend: this.backends.series }, "series store ready");
        }
      } catch (err) {
        if (isFatal(err)) {
          this.onFatal(err as Error);
          return;
        }
        const store: StoreName = this.relational ? "series" : "relational";
        const message = detail(err);
        this.lastError[store] = message;
        this.log.warn(
          { store, backend: this.backends[store], err: message, retryInMs: delay },
          `${this.backends[store]} is unreachable; retrying`,
        );
        await new Promise<void>((resolve) => {
          const t = setTimeout(resolve, delay);
          this.wake = () => {
            clearTimeout(t);
            resolve();
          };
        });
        delay = Math.min(delay * 2, 15_000);
      }
    }
    if (this.isReady) {
      const waiters = this.readyWaiters;
      this.readyWaiters = [];
      for (const w of waiters) w();
    }
  }

  /** Live check of both stores, bounded in time; used by /readyz. */
  async check(timeoutMs = 2_000): Promise<Record<StoreName, StoreStatus>> {
    const probe = async (
      name: StoreName,
      store: { ping(): Promise<void> } | undefined,
    ): Promise<StoreStatus> => {
      const backend = this.backends[name];
      if (!store) return { backend, ok: false, error: this.lastError[name] ?? "connecting" };
      let timer: NodeJS.Timeout | undefined;
      try {
        await Promise.race([
          store.ping(),
          new Promise((_, reject) => {
            timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
          }),
        ]);
        return { backend, ok: true };
      } catch (err) {
        return { backend, ok: false, error: detail(err) };
      } finally {
        clearTimeout(timer);
      }
    };
    const [relational, series] = await Promise.all([
      probe("relational", this.relational),
      probe("series", this.seriesStore),
    ]);
    return { relational, series };
  }

  /** Flushes pending series writes and closes both stores. */
  async close(): Promise<void> {
    this.stopped = true;
    this.wake?.();
    await this.seriesStore?.close().catch((err) => this.log.error({ err }, "closing series store"));
    await this.relational?.close().catch((err) => this.log.error({ err }, "closing relational store"));
  }
}
