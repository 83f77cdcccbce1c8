import pg from "pg";
import { fmt, table } from "./report.js";

/** One statement's share over a measured window, from pg_stat_statements. */
export interface StatementCost {
  query: string;
  calls: number;
  rows: number;
  /** execution time in ms (planning included when pg_stat_statements tracks it) */
  totalMs: number;
}

/**
 * Statements per check and their cost, from pg_stat_statements, for one benchmark database. The
 * extension must be in `shared_preload_libraries` (a server setting and a restart; PostgreSQL's
 * own documentation); without it the benchmark says so and prints the rest of its figures.
 */
export class StatementMeter {
  private constructor(
    private readonly client: pg.Client,
    private readonly dbid: number,
  ) {}

  /** The meter, or the reason it cannot measure (printed by the benchmark). */
  static async open(url: string): Promise<StatementMeter | string> {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      await client.query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements");
      await client.query("SELECT count(*) FROM pg_stat_statements");
      const r = await client.query<{ oid: number }>(
        "SELECT oid FROM pg_database WHERE datname = current_database()",
      );
      return new StatementMeter(client, Number(r.rows[0]?.oid));
    } catch (err) {
      await client.end();
      return `pg_stat_statements is not available (${(err as Error).message.split("\n")[0]}): add it to shared_preload_libraries and restart PostgreSQL to see statements per check`;
    }
  }

  /** Starts a window: the counters of this database go to zero. */
  async reset(): Promise<void> {
    await this.client.query("SELECT pg_stat_statements_reset(0, $1::oid, 0)", [this.dbid]);
  }

  /** The statements run in this database since `reset`, costliest first (this meter's own left out). */
  async read(): Promise<StatementCost[]> {
    const r = await this.client.query<{ query: string; calls: string; rows: string; ms: number }>(
      `SELECT query, calls, rows, total_exec_time + coalesce(total_plan_time, 0) AS ms
         FROM pg_stat_statements WHERE dbid = $1 AND query NOT LIKE '%pg_stat_statements%'
        ORDER BY ms DESC`,
      [this.dbid],
    );
    return r.rows.map((x) => ({
      query: x.query,
      calls: Number(x.calls),
      rows: Number(x.rows),
      totalMs: x.ms,
    }));
  }

  async close(): Promise<void> {
    await this.client.end();
  }
}

/** A table of statements per check and their time per check, the costliest first. */
export function statementsTable(rows: StatementCost[], checks: number, top = 12): string {
  const per = (x: number) => x / Math.max(1, checks);
  const all = rows.reduce((a, s) => ({ calls: a.calls + s.calls, ms: a.ms + s.totalMs }), {
    calls: 0,
    ms: 0,
  });
  const short = (q: string) => q.replace(/\s+/g, " ").slice(0, 90);
  return table(
    ["statement", "calls per check", "rows per call", "µs per check"],
    [
      ...rows
        .slice(0, top)
        .map((s) => [
          short(s.query),
          fmt(per(s.calls), 3),
          fmt(s.rows / Math.max(1, s.calls), 1),
          fmt(per(s.totalMs) * 1000, 1),
        ]),
      ["all statements", fmt(per(all.calls), 3), "", fmt(per(all.ms) * 1000, 1)],
    ],
  );
}
