import type { Logger } from "pino";
import { buildApp } from "./app.js";
import type { Config } from "./config.js";
import { startAdminSocket } from "./admin/socket.js";
import { closeContext, createContext } from "./core/context.js";
import { revokeUserAccess } from "./oauth/service.js";
import { keyStore } from "./identity/keys.js";
import { clusterJobs, probeProcessJobs } from "./jobs/jobs.js";
import { JobRunner } from "./jobs/runner.js";
import { DeliveryJob } from "./notifications/delivery.js";
import { smtpMailer } from "./notifications/mailer.js";
import { ProbeWorker } from "./probes/worker.js";
import { createLogger } from "./lib/logger.js";
import { stopTracing } from "./lib/tracing.js";
import { metricsText, setMetricsSource, watchOutboxes } from "./lib/metrics.js";
import { startMetricsListener } from "./metrics-server.js";
import { askPrimaryForMetrics } from "./cluster.js";
import { pendingByChannel } from "./notifications/repository.js";
import { StoreSupervisor } from "./stores/supervisor.js";

export const ALL_ROLES = ["api", "probe", "jobs"] as const;
export type Role = (typeof ALL_ROLES)[number];

export function parseRoles(value: string | undefined): Role[] {
  if (!value) return [...ALL_ROLES];
  const roles = value
    .split(",")
    .map((r) => r.trim())
    .filter(Boolean);
  for (const r of roles) {
    if (!(ALL_ROLES as readonly string[]).includes(r))
      throw new Error(`--roles: unknown role "${r}"; use a comma-separated subset of ${ALL_ROLES.join(",")}`);
  }
  return roles as Role[];
}

function describeStorage(config: Config): string {
  const rel = config.databaseUrl ? "PostgreSQL (DATABASE_URL)" : `embedded PGlite in ${config.dataDir}`;
  const series = config.questdb
    ? `QuestDB at ${config.questdb.httpUrl}`
    : config.databaseUrl
      ? "PostgreSQL tables"
      : "PGlite tables";
  return `relational store: ${rel}; series store: ${series}`;
}

/**
 * `vigil serve`: one process with the roles asked for. It listens at once (so /healthz and
 * /readyz answer while the stores are still connecting) and shuts down gracefully on
 * SIGTERM/SIGINT: stop accepting, finish in-flight requests, flush series writes, close pools.
 * `opts.worker` names a worker of `vigil serve --workers N` (cluster.ts); its logger carries the
 * name already.
 */
export async function serve(
  config: Config,
  roles: Role[],
  log: Logger = createLogger(config.logLevel),
  opts: { worker?: string } = {},
) {
  const stores = new StoreSupervisor(config, log, (err) => {
    log.fatal(err.message);
    process.stderr.write(`vigil: ${err.message}\n`);
    process.exit(1);
  });
  const ctx = createContext(config, log, stores);
  const app = await buildApp(ctx);

  let closing = false;
  const shutdown = async (signal: string) => {
    if (closing && opts.worker) {
      // a worker of `serve --workers` (cluster.ts): the primary forwards its signal, and a
      // terminal's Ctrl-C reaches both; the primary kills a worker that drains too long
      log.info({ signal }, "already draining");
      return;
    }
    if (closing) {
      log.warn({ signal }, "second signal: exiting without waiting");
      process.exit(1);
    }
    closing = true;
    log.info({ signal }, "shutting down: draining in-flight requests");
    const force = setTimeout(() => {
      log.error("shutdown took longer than 20 s; exiting");
      process.exit(1);
    }, 20_000);
    force.unref();
    try {
      await app.close();
      await probeJobs?.stop();
      await prober?.stop();
      await jobs?.stop();
      delivery?.stop();
      adminSocket?.close();
      await metricsListener?.close();
      await closeContext(ctx);
      await stores.close();
      await stopTracing(); // the spans still buffered, up to 5 s; nothing when tracing is off
      log.info("shutdown complete");
    } catch (err) {
      log.error({ err }, "error during shutdown");
      process.exitCode = 1;
    } finally {
      clearTimeout(force);
      // Give pino a tick to write the last lines, then leave even if a library keeps a handle.
      setImmediate(() => process.exit());
    }
  };
  process.on("SIGTERM", () => void shutdown("SIGTERM"));
  process.on("SIGINT", () => void shutdown("SIGINT"));

  let metricsListener: Awaited<ReturnType<typeof startMetricsListener>> | undefined;
  if (opts.worker && process.send) setMetricsSource(askPrimaryForMetrics);
  else if (config.metrics.port !== undefined) {
    try {
      metricsListener = await startMetricsListener(config, metricsText, log);
    } catch (err) {
      const message = `the metrics listener cannot listen on ${config.metrics.host}:${config.metrics.port} (${(err as Error).message}); choose another METRICS_PORT`;
      log.fatal(message);
      process.stderr.write(`vigil: ${message}\n`);
      process.exit(1);
    }
  }

  stores.start();
  // a worker of `serve --workers` tells the primary once its stores are ready (migrations and the
  // QuestDB schema applied), so the primary can start the other workers after it (cluster.ts)
  if (opts.worker && process.send)
    void stores.whenReady().then(() => process.send?.({ vigil: "stores-ready" }));
  let adminSocket: Awaited<ReturnType<typeof startAdminSocket>> | undefined;
  if (!config.databaseUrl) {
    // Embedded mode: this process owns the PGlite folder, so it serves `vigil admin`.
    void stores.whenReady().then(async () => {
      adminSocket = await startAdminSocket(
        config.dataDir,
        () => ({
          db: stores.db,
          credentials: ctx.credentials,
          keys: keyStore(ctx),
          now: () => ctx.now(),
          revokeUserAccess: (user: string) => revokeUserAccess(ctx, user),
          secrets: ctx.secrets,
          publicUrl: ctx.config.publicUrl,
        }),
        log,
      );
    });
  }
  let prober: ProbeWorker | undefined;
  let probeJobs: JobRunner | undefined;
  if (roles.includes("probe")) {
    void stores.whenReady().then(() => {
      if (closing) return;
      prober = new ProbeWorker(ctx, {
        leaseMs: config.probe.leaseSeconds * 1000,
        concurrency: config.probe.concurrency,
        timeoutMs: config.probe.timeoutMs,
      });
      prober.start();
      probeJobs = new JobRunner(ctx, probeProcessJobs(prober));
      probeJobs.start();
      log.info({ probeWorker: prober.workerId }, "probe scheduler started");
    });
  }
  let delivery: DeliveryJob | undefined;
  let jobs: JobRunner | undefined;
  if (roles.includes("jobs")) {
    void stores.whenReady().then(() => {
      if (closing) return;
      delivery = new DeliveryJob(
        () => stores.db,
        config.smtpUrl ? smtpMailer(config.smtpUrl, config.mailFrom) : null,
        log,
        { now: () => ctx.now() },
      );
      watchOutboxes(() => pendingByChannel(stores.db));
      // One runner for the cluster's periodic work: heartbeat monitor, rollups, expiry, e-mail
      // delivery, probe housekeeping; each under its lock (jobs/jobs.ts).
      jobs = new JobRunner(ctx, clusterJobs(delivery));
      jobs.start();
    });
  }
  if (roles.includes("api")) {
    await app.listen({ host: config.host, port: config.port });
  }
  log.info({ roles, publicUrl: config.publicUrl }, `Vigil serving (${describeStorage(config)})`);
  if (!config.databaseUrl) {
    process.stderr.write(
      `Vigil is running on the embedded default; its data lives in ${config.dataDir}\n` +
        `  API: ${config.publicUrl}/v1  reference: ${config.publicUrl}/docs  health: ${config.publicUrl}/healthz  readiness: ${config.publicUrl}/readyz\n`,
    );
  }
  return { app, stores, ctx };
}
