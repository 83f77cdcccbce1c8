import type pg from "pg";
import type { Test } from "tap";
import { type Running, spawnVigil, runAdmin } from "../helpers/process.js";

/** Shared pieces of the fault tests (test/faults): a Vigil account, JSON calls, store visibility. */

export type Env = Record<string, string>;

/** Runs one `vigil admin` command and returns its JSON answer. */
export const admin = runAdmin;

/** An enterprise user and an all-permissions personal key. */
export async function account(t: Test, env: Env, email: string): Promise<{ userId: string; key: string }> {
  const user = await admin(t, env, "create-user", "--email", email, "--plan", "enterprise");
  const { key } = await admin(t, env, "create-key", "--user", user.id as string);
  return { userId: user.id as string, key: key as string };
}

/** `vigil serve` on a free port, resolved once both stores are ready. */
export async function serveReady(
  t: Test,
  env: Env,
  args: string[] = [],
  ms = 120_000,
): Promise<Running & { url: string; startedMs: number }> {
  const started = Date.now();
  // as serveOnFreePort, with a deadline that survives a busy host, and a clear word if it died
  const server = spawnVigil(t, ["serve", ...args], { ...env, PORT: "0", LOG_LEVEL: "info" });
  const died = new Promise<never>((_, reject) =>
    server.proc.once("exit", (code, signal) =>
      reject(new Error(`vigil serve exited (${signal ?? code}) before it was ready:\n${server.output()}`)),
    ),
  );
  died.catch(() => {});
  const m = await Promise.race([server.waitFor(/Server listening at (http:\/\/127\.0\.0\.1:\d+)/, ms), died]);
  await Promise.race([server.waitFor(/series store ready/, ms), died]);
  return { ...server, url: m[1] as string, startedMs: Date.now() - started };
}

export interface JsonAnswer<T = unknown> {
  status: number;
  headers: Headers;
  body: T;
}

/** One JSON request; network failures reject (the caller decides what they mean). */
export async function call<T = unknown>(
  url: string,
  opts: {
    method?: string;
    key?: string;
    body?: unknown;
    signal?: AbortSignal;
    headers?: Record<string, string>;
  } = {},
): Promise<JsonAnswer<T>> {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.key) headers.authorization = `Bearer ${opts.key}`;
  if (opts.body !== undefined) headers["content-type"] = "application/json";
  const r = await fetch(url, {
    method: opts.method ?? (opts.body === undefined ? "GET" : "POST"),
    headers,
    body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
    signal: opts.signal,
  });
  const text = await r.text();
  let body: unknown = text;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    // not JSON: kept as text
  }
  return { status: r.status, headers: r.headers, body: body as T };
}

export async function createConnection(
  base: string,
  key: string,
  body: Record<string, unknown>,
): Promise<{ id: string; ingestKey?: string }> {
  const r = await call<{ connection: { id: string }; ingest_api_key?: string }>(`${base}/v1/connections`, {
    key,
    body,
  });
  if (r.status !== 201)
    throw new Error(`creating a connection answered ${r.status}: ${JSON.stringify(r.body)}`);
  return { id: r.body.connection.id, ingestKey: r.body.ingest_api_key };
}

/**
 * Resolves once every QuestDB WAL transaction of `tables` sequenced before the call has been
 * applied, so reads see every write acknowledged before it (the shared server keeps taking other
 * tests' writes, so the target is fixed at the call).
 */
export async function questdbApplied(pool: pg.Pool, tables: string[], timeoutMs = 30_000): Promise<void> {
  const ph = tables.map((_, i) => `$${i + 1}`).join(", ");
  const read = async () =>
    (
      await pool.query(
        `SELECT name, writerTxn, sequencerTxn, suspended FROM wal_tables() WHERE name IN (${ph})`,
        tables,
      )
    ).rows as { name: string; writerTxn: number; sequencerTxn: number; suspended: boolean }[];
  const target = new Map((await read()).map((r) => [r.name, Number(r.sequencerTxn)]));
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const rows = await read();
    const suspended = rows.find((r) => r.suspended);
    if (suspended) throw new Error(`QuestDB table ${suspended.name} is suspended`);
    if (rows.every((r) => Number(r.writerTxn) >= (target.get(r.name) ?? 0))) return;
    if (Date.now() > deadline) throw new Error("QuestDB did not apply its WAL in time");
    await new Promise((r) => setTimeout(r, 20));
  }
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export function quantile(values: number[], q: number): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] as number;
}

/** A fixed-width text table for the printed summaries. */
export function table(rows: (string | number)[][]): string {
  const widths = rows[0]?.map((_, c) => Math.max(...rows.map((r) => String(r[c] ?? "").length))) ?? [];
  return rows
    .map((r) =>
      r
        .map((v, c) =>
          typeof v === "number"
            ? String(v).padStart(widths[c] as number)
            : String(v).padEnd(widths[c] as number),
        )
        .join("  "),
    )
    .join("\n");
}
