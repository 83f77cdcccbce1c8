import { parseArgs } from "node:util";
import { buildApp } from "../src/app.js";
import type { Config } from "../src/config.js";
import { closeContext, createContext } from "../src/core/context.js";
import { createKey, createUser } from "../src/identity/accounts.js";
import { PERMISSIONS, type Actor } from "../src/core/actor.js";
import { createLogger } from "../src/lib/logger.js";
import { migrate } from "../src/stores/relational/migrate.js";
import { createPgStore } from "../src/stores/relational/pg.js";
import { createPgliteStore } from "../src/stores/relational/pglite.js";
import type { RelationalStore } from "../src/stores/relational/types.js";
import { createSqlSeriesStore } from "../src/stores/series/sql.js";
import { StoreSupervisor } from "../src/stores/supervisor.js";
import { type LoadResult, load } from "./lib/load.js";
import { fmt, table, verdict } from "./lib/report.js";
import { positiveInt, throwawayDatabase } from "./lib/postgres.js";

/**
 * `vigil bench auth`: requests per second of GET /v1/connections/{id} with a warm API key,
 * against the same route with authentication and rate limiting switched off, in the same run,
 * on the same stores (PostgreSQL when reachable, else PGlite). The two servers take turns;
 * each figure is the better of two rounds.
 */
export async function run(config: Config, args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: { seconds: { type: "string", default: "10" }, connections: { type: "string", default: "50" } },
  });
  const seconds = positiveInt("seconds", values.seconds);
  const connections = positiveInt("connections", values.connections);
  const log = createLogger("warn");
  const benchConfig: Config = {
    ...config,
    logLevel: "warn",
    secret: config.secret ?? "bench-secret-bench-secret-bench-secret!",
  };

  const { db, backend, drop } = await openDb(config);
  try {
    await migrate(db);
    const stores = StoreSupervisor.ready({ db, series: createSqlSeriesStore(db) }, log, benchConfig);
    const user = await createUser(db, { email: `bench-${Date.now()}@x.example`, plan: "enterprise" });
    await db.query("UPDATE users SET rate_limit_per_hour = 1000000000 WHERE id = $1", [user.id]);
    const { key } = await createKey(db, { user: user.id, permissions: [...PERMISSIONS] });

    const ctx = createContext(benchConfig, log, stores);
    const withAuth = await buildApp(ctx);
    const fixed: Actor = {
      type: "api_key",
      keyId: "bench",
      userId: user.id,
      scope: "personal",
      organizationId: null,
      permissions: new Set(PERMISSIONS),
    };
    const noAuth = await buildApp(ctx, { fixedActor: fixed });
    const authUrl = await withAuth.listen({ host: "127.0.0.1", port: 0 });
    const openUrl = await noAuth.listen({ host: "127.0.0.1", port: 0 });

    const created = await withAuth.inject({
      method: "POST",
      url: "/v1/connections",
      headers: { authorization: `Bearer ${key}` },
      payload: {
        service_type: "workflow_a",
        service_name: "bench",
        base_url: "http://127.0.0.1:1",
        api_key: "k",
      },
    });
    const id = (created.json() as { connection: { id: string } }).connection.id;
    const path = `/v1/connections/${id}`;
    const headers = { authorization: `Bearer ${key}` };

    process.stderr.write(`auth bench on ${backend}: ${connections} connections, ${seconds} s per round\n`);
    await load(`${authUrl}${path}`, { connections, seconds: 2, headers }); // warm-up
    await load(`${openUrl}${path}`, { connections, seconds: 2 });
    const authRuns: LoadResult[] = [];
    const openRuns: LoadResult[] = [];
    for (let round = 1; round <= 2; round++) {
      process.stderr.write(`round ${round}: no auth...\n`);
      openRuns.push(await load(`${openUrl}${path}`, { connections, seconds }));
      process.stderr.write(`round ${round}: with auth and rate limit...\n`);
      authRuns.push(await load(`${authUrl}${path}`, { connections, seconds, headers }));
    }
    const best = (runs: LoadResult[]) => runs.reduce((a, b) => (b.rps > a.rps ? b : a));
    const a = best(authRuns);
    const o = best(openRuns);
    if (a.non2xx + o.non2xx + a.errors + o.errors > 0)
      process.stderr.write(`warning: non-2xx ${a.non2xx + o.non2xx}, errors ${a.errors + o.errors}\n`);

    console.log(
      `\nauth: GET /v1/connections/{id}, ${connections} connections, ${seconds} s x 2 rounds, stores: ${backend}\n`,
    );
    console.log(
      table(
        ["route", "req/s", "p50 ms", "p99 ms", "ratio"],
        [
          ["auth + rate limit off (baseline)", fmt(o.rps), fmt(o.p50, 1), fmt(o.p99, 1), "1.00"],
          ["warm API key + rate limit", fmt(a.rps), fmt(a.p50, 1), fmt(a.p99, 1), fmt(a.rps / o.rps, 2)],
        ],
      ),
    );
    console.log(`\nwith auth / without = ${fmt(a.rps / o.rps, 2)}: ${verdict(a.rps / o.rps, 0.7)}`);
    await withAuth.close();
    await noAuth.close();
    await closeContext(ctx);
  } finally {
    await db.close();
    await drop();
  }
}

async function openDb(
  config: Config,
): Promise<{ db: RelationalStore; backend: string; drop: () => Promise<void> }> {
  let scratch: Awaited<ReturnType<typeof throwawayDatabase>>;
  try {
    scratch = await throwawayDatabase(config);
  } catch {
    return { db: await createPgliteStore(), backend: "PGlite (in memory)", drop: async () => {} };
  }
  return {
    db: createPgStore({ connectionString: scratch.url }),
    backend: "PostgreSQL",
    drop: scratch.drop,
  };
}
