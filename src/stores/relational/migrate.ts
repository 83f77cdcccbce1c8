import fs from "node:fs";
import path from "node:path";
import { sqlDir } from "../../lib/paths.js";
import type { RelationalStore } from "./types.js";

export interface Migration {
  version: string;
  file: string;
  sql: string;
}

export class MigrationError extends Error {
  constructor(
    readonly file: string,
    cause: unknown,
  ) {
    super(`Migration ${file} failed: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.name = "MigrationError";
  }
}

/** Numbered plain-SQL files (`001_name.sql`), in order. */
export function readMigrations(dir = path.join(sqlDir, "postgres")): Migration[] {
  return fs
    .readdirSync(dir)
    .filter((f) => /^\d+_[\w-]+\.sql$/.test(f))
    .sort()
    .map((f) => ({
      version: f.replace(/\.sql$/, ""),
      file: path.join(dir, f),
      sql: fs.readFileSync(path.join(dir, f), "utf8"),
    }));
}

// Any fixed 64-bit number; every Vigil process migrating the same database takes this lock.
const MIGRATION_LOCK = 7_214_530_511;

/**
 * Applies the pending migrations, each in its own transaction together with its record in
 * `schema_migrations`. A transaction-scoped advisory lock makes concurrent starters take turns:
 * the second one finds the migration recorded and skips it. Safe to re-run.
 */
export async function migrate(
  db: RelationalStore,
  opts: { migrations?: Migration[]; onApplied?: (m: Migration) => void } = {},
): Promise<string[]> {
  const migrations = opts.migrations ?? readMigrations();
  const applied: string[] = [];
  for (const m of migrations) {
    const done = await db.transaction(async (tx) => {
      await tx.query("SELECT pg_advisory_xact_lock($1)", [MIGRATION_LOCK]);
      await tx.exec(
        `CREATE TABLE IF NOT EXISTS schema_migrations (
           version text PRIMARY KEY,
           applied_at timestamptz NOT NULL DEFAULT now()
         )`,
      );
      const seen = await tx.query("SELECT 1 FROM schema_migrations WHERE version = $1", [m.version]);
      if (seen.rows.length > 0) return false;
      try {
        await tx.exec(m.sql);
      } catch (err) {
        throw new MigrationError(path.relative(process.cwd(), m.file) || m.file, err);
      }
      await tx.query("INSERT INTO schema_migrations (version) VALUES ($1)", [m.version]);
      return true;
    });
    if (done) {
      applied.push(m.version);
      opts.onApplied?.(m);
    }
  }
  return applied;
}
