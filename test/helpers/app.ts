import type { FastifyInstance } from "fastify";
import type { Test } from "tap";
import { buildApp } from "../../src/app.js";
import { type Config, loadConfig } from "../../src/config.js";
import { type AppContext, closeContext, createContext } from "../../src/core/context.js";
import { KeyStore, type KeyStoreOptions, keyStore } from "../../src/identity/keys.js";
import type { RateLimiterOptions } from "../../src/ratelimit/limiter.js";
import { createLogger } from "../../src/lib/logger.js";
import type { SeriesStore } from "../../src/stores/series/types.js";
import { StoreSupervisor } from "../../src/stores/supervisor.js";
import { type BackendName, freshRelational, freshSeries } from "./backends.js";

export interface TestApp {
  app: FastifyInstance;
  ctx: AppContext;
}

/**
 * The real app around real stores of its own (PGlite by default), torn down with the test.
 * Logs are silent unless TEST_LOG_LEVEL is set (or `env.LOG_LEVEL`, with `logTo` to capture them).
 */
export async function testApp(
  t: Test,
  opts: {
    relational?: "pglite" | "postgres";
    series?: BackendName;
    env?: Record<string, string>;
    /** Tuning of the per-app key cache and the edge's rate limiter. */
    context?: { keys?: KeyStoreOptions; limiter?: RateLimiterOptions };
    /** Share another test app's stores (a second node on the same databases). */
    sameStoresAs?: TestApp;
    /** Use this series store instead of a fresh one (e.g. one pointing at a server that is down). */
    seriesStore?: SeriesStore;
    /** Write the app's log here (at the config's LOG_LEVEL) instead of stdout. */
    logTo?: NodeJS.WritableStream;
  } = {},
): Promise<TestApp> {
  const config: Config = loadConfig({
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? "silent",
    VIGIL_SECRET: "test-secret-test-secret-test-secret-0123",
    ...opts.env,
  });
  const log = createLogger(config.logLevel, opts.logTo);
  let stores: StoreSupervisor;
  if (opts.sameStoresAs) {
    stores = opts.sameStoresAs.ctx.stores;
  } else {
    const relational = opts.relational ?? "pglite";
    const db = await freshRelational(t, relational);
    const series =
      opts.seriesStore ??
      (opts.series && opts.series !== relational ? await freshSeries(t, opts.series) : await sqlSeriesOn(db));
    stores = StoreSupervisor.ready({ db, series }, log, config);
  }
  const ctx: AppContext = createContext(config, log, stores);
  if (opts.context?.keys) keyStore.set(ctx, new KeyStore(() => ctx.stores.db, ctx.log, opts.context.keys));
  const app = await buildApp(ctx, { limiter: opts.context?.limiter });
  t.teardown(async () => {
    await app.close();
    await closeContext(ctx);
  });
  return { app, ctx };
}

async function sqlSeriesOn(db: Awaited<ReturnType<typeof freshRelational>>) {
  const { createSqlSeriesStore } = await import("../../src/stores/series/sql.js");
  return createSqlSeriesStore(db);
}
