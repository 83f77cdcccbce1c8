import type { Logger } from "pino";
import type { Config } from "../config.js";
import { openRelational, openSeries, type Stores } from "./index.js";
import { DataDirLockedError } from "./relational/dir-lock.js";
import { MigrationError, migrate } from "./relational/migrate.js";
import type { RelationalStore } from "./relational/types.js";
import type { SeriesStore } from "./series/types.js";

export type StoreName = "relational" | "series";

export interface StoreStatus {
  backend: string;
  ok: boolean;
  error?: string;
}

/** Thrown when a request needs a store that is not connected yet. Maps to a 503. */
export class StoreNotReadyError extends Error {
  constructor(readonly store: StoreName) {
    super(`The ${store} store is not reachable yet; Vigil keeps retrying. Check /readyz.`);
    this.name = "StoreNotReadyError";
  }
}

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
    s.relational = stores.db;
    s.seriesStore = stores.series;
    return s;
  }

  get db(): RelationalStore {
    if (!this.relational) throw new StoreNotReadyError("relational");
    return this.relational;
  }

  get series(): SeriesStore {
    if (!this.seriesStore) throw new StoreNotReadyError("series");
    return this.seriesStore;
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
          this.relational = db;
          delete this.lastError.relational;
          this.log.info({ backend: this.backends.relational }, "relational store ready");
        }
        if (!this.seriesStore) {
          this.seriesStore = await openSeries(this.config, this.relational);
          delete this.lastError.series;
          this.log.info({ backend: this.backends.series }, "series store ready");
        }
      } catch (err) {
        if (isFatal(err)) {
          this.onFatal(err as Error);
          return;
        }
        const store: StoreName = this.relational ? "series" : "relational";
        const message = (err as Error).message || String(err);
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
        return { backend, ok: false, error: (err as Error).message };
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
