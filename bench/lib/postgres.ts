import pg from "pg";
import type { Config } from "../../src/config.js";

const DEFAULT_ADMIN_URL = "postgres://postgres@127.0.0.1:5432/postgres";

/**
 * A PostgreSQL database of its own for one benchmark run, created on the server of
 * DATABASE_URL (else the local one) and dropped by `drop()`. Throws when the server cannot be
 * reached, naming it.
 */
export async function throwawayDatabase(
  config: Config,
  label = "bench",
): Promise<{ url: string; drop: () => Promise<void> }> {
  const adminUrl = config.databaseUrl ?? DEFAULT_ADMIN_URL;
  const admin = new pg.Client({ connectionString: adminUrl, connectionTimeoutMillis: 3000 });
  try {
    await admin.connect();
  } catch (err) {
    throw new Error(
      `PostgreSQL is not reachable at ${adminUrl} (${(err as Error).message}); set DATABASE_URL to a server this benchmark may create databases on`,
      { cause: err },
    );
  }
  const name = `vigil_${label}_${Date.now().toString(36)}`;
  await admin.query(`CREATE DATABASE ${name}`);
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: async () => {
      await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await admin.end();
    },
  };
}

/** A positive whole number from a command-line option, or an error naming the option. */
export function positiveInt(name: string, value: string | undefined): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n <= 0)
    throw new Error(`--${name} must be a positive whole number, got ${JSON.stringify(value)}`);
  return n;
}
