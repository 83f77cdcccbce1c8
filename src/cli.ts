#!/usr/bin/env -S node --max-semi-space-size=32
import { parseArgs } from "node:util";
import type { Config } from "./config.js";
import cluster from "node:cluster";
import { startTracing } from "./lib/tracing.js";

// Traces (OTEL_EXPORTER_OTLP_ENDPOINT; off by default) for `vigil serve` and its workers. The
// SDK patches pg and node:http as they are first required, so it starts before the rest of the
// CLI is imported: a static import would load them all before this line runs.
const tracing = process.argv[2] === "serve" ? await startTracing() : undefined;
const { ConfigError, loadConfig } = await import("./config.js");
const { parseRoles, serve } = await import("./server.js");
const { parseWorkers, servePrimary } = await import("./cluster.js");
const { createLogger } = await import("./lib/logger.js");
const { adminMain } = await import("./admin/cli.js");
const { simMain } = await import("./sim/cli.js");
const { migrateAll } = await import("./stores/index.js");

const USAGE = `Usage: vigil <command> [options]

Commands:
  serve [--roles api,probe,jobs] [--workers N]
                                   REST API, ingest, MCP tool server + OAuth, probes and jobs (default: all roles);
                                   --workers N: N API processes on one port (node:cluster) plus one process for
                                   the probe and jobs roles; needs DATABASE_URL
  migrate                          apply database migrations and the QuestDB schema, then exit
  admin <command> [options]        account set-up (create-user, create-org, add-member, create-key, revoke-key, revoke-access, mcp-token)
  sim <kind> [options]             simulators of the monitored platforms (workflow_a, workflow_b, gateway)
  bench <name> [options]           load benchmarks with a printed report (series-write, auth, ingest, probes, read, mcp, notify, slo, metrics, status-page, otlp, …)

Configuration comes from the environment; see .env.example.`;

function fail(message: string, code = 1): never {
  process.stderr.write(`vigil: ${message}\n`);
  process.exit(code);
}

async function main(argv: string[]): Promise<void> {
  const [command, ...rest] = argv;
  if (!command || command === "--help" || command === "-h" || command === "help") {
    process.stdout.write(`${USAGE}\n`);
    return;
  }
  const config = (() => {
    try {
      return loadConfig();
    } catch (err) {
      if (err instanceof ConfigError) fail(err.message, 2);
      throw err;
    }
  })();

  switch (command) {
    case "serve": {
      const { values } = parseArgs({
        args: rest,
        options: {
          roles: { type: "string" },
          workers: { type: "string" },
          // set by the primary of --workers on each worker's command line (cluster.ts)
          worker: { type: "string" },
        },
      });
      let roles: ReturnType<typeof parseRoles>;
      let workers: number | undefined;
      try {
        roles = parseRoles(values.roles);
        workers = parseWorkers(values.workers);
      } catch (err) {
        fail((err as Error).message, 2);
      }
      const log = createLogger(config.logLevel);
      if (tracing?.on) log.info({ endpoint: tracing.endpoint }, "tracing on: spans exported by OTLP");
      else if (tracing?.error) log.warn({ err: tracing.error }, `tracing off: ${tracing.reason}`);
      else log.debug(`tracing off: ${tracing?.reason}`);
      if (cluster.isWorker) {
        const name = values.worker ?? `worker-${cluster.worker?.id ?? "?"}`;
        await serve(config, roles, log.child({ worker: name }), { worker: name });
        return;
      }
      if (workers !== undefined) {
        try {
          servePrimary(config, roles, workers, log);
        } catch (err) {
          fail((err as Error).message, 2);
        }
        return;
      }
      await serve(config, roles, log);
      return;
    }
    case "migrate": {
      const result = await migrateAll(config, (line) => process.stdout.write(`${line}\n`));
      process.stdout.write(
        result.applied.length ? `migrations applied: ${result.applied.length}\n` : "database is up to date\n",
      );
      return;
    }
    case "bench": {
      const [name, ...args] = rest;
      if (!name || !/^[a-z-]+$/.test(name))
        fail("bench: name a benchmark, e.g. `vigil bench series-write`", 2);
      let mod: { run(config: Config, args: string[]): Promise<void> };
      try {
        mod = await import(new URL(`../bench/${name}.js`, import.meta.url).href);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === "ERR_MODULE_NOT_FOUND")
          fail(`bench: no benchmark named ${name}`, 2);
        throw err;
      }
      await mod.run(config, args);
      return;
    }
    case "admin": {
      process.exitCode = await adminMain(config, rest);
      return;
    }
    case "sim":
      process.exitCode = await simMain(rest);
      return;
    default:
      fail(`unknown command "${command}"\n\n${USAGE}`, 2);
  }
}

main(process.argv.slice(2)).catch((err: unknown) => {
  fail(err instanceof Error ? err.message : String(err));
});
