import type { Logger } from "pino";
import type { Config } from "./config.js";
import { ConnectionStatusCache } from "./connections/status.js";
import { PriceBook } from "./ingest/pricing.js";
import { PeriodlessRepeats } from "./ingest/repeats.js";
import { KeyStore, type KeyStoreOptions } from "./identity/keys.js";
import { CredentialBox } from "./lib/credentials.js";
import { resolveSecrets } from "./lib/secret.js";
import { CursorCodec } from "./read/cursor.js";
import { RateLimiter, type RateLimiterOptions } from "./ratelimit/limiter.js";
import type { StoreSupervisor } from "./stores/supervisor.js";

/** What every part of Vigil receives: configuration, logger, stores, clock and shared services. */
export interface AppContext {
  config: Config;
  log: Logger;
  stores: StoreSupervisor;
  /** Current time; tests may substitute a controllable clock. */
  now: () => Date;
  credentials: CredentialBox;
  keys: KeyStore;
  limiter: RateLimiter;
  prices: PriceBook;
  connectionStatus: ConnectionStatusCache;
  heartbeatRepeats: PeriodlessRepeats;
  cursors: CursorCodec;
}

export interface ContextOptions {
  keys?: KeyStoreOptions;
  limiter?: RateLimiterOptions;
}

export function createContext(
  config: Config,
  log: Logger,
  stores: StoreSupervisor,
  opts: ContextOptions = {},
): AppContext {
  const secrets = resolveSecrets(config, (msg) => log.warn(msg));
  return {
    config,
    log,
    stores,
    now: () => new Date(),
    credentials: new CredentialBox(secrets),
    keys: new KeyStore(() => stores.db, log, opts.keys),
    limiter: new RateLimiter(() => stores.db, log, opts.limiter),
    prices: new PriceBook(() => stores.db),
    connectionStatus: new ConnectionStatusCache(() => stores.db),
    heartbeatRepeats: new PeriodlessRepeats(() => stores.series),
    cursors: new CursorCodec(secrets.current),
  };
}

/** Stops the context's timers and writes what they hold (key last-use, rate counts). */
export async function closeContext(ctx: AppContext): Promise<void> {
  await ctx.keys.close().catch(() => {});
  await ctx.limiter.close().catch(() => {});
}
