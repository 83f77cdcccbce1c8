import { Pool } from "undici";
import type { ColumnType, TableDef } from "./tables.js";

/**
 * InfluxDB line protocol (text, protocol version 1) for QuestDB's HTTP `/write` endpoint:
 * rows are encoded into one string per flush and sent as one request.
 *
 * Why not @questdb/nodejs-client's Sender on this path: it writes every fragment (and every
 * escaped character) with its own Buffer.write into a growing buffer; on heartbeat ingest that
 * encoding was 23% of Vigil's CPU, the largest single cost. Building the text with string
 * concatenation and converting it once is several times cheaper and sends the same bytes
 * (test/stores/ilp.test.ts compares them with the client's). The client stays the baseline
 * the benchmarks measure against.
 */

const TAG_SPECIAL = /[ ,=\n\r\\]/;
const TAG_ESCAPES = /[ ,=\n\r\\]/g;
const STRING_SPECIAL = /["\n\r\\]/;
const STRING_ESCAPES = /["\n\r\\]/g;

/** Names and symbol values: space, comma, equals sign, line breaks and backslash are escaped. */
export function escapeTag(s: string): string {
  return TAG_SPECIAL.test(s) ? s.replace(TAG_ESCAPES, (c) => `\\${c}`) : s;
}

/** String values, quoted: double quote, line breaks and backslash are escaped. */
export function quoteString(s: string): string {
  return `"${STRING_SPECIAL.test(s) ? s.replace(STRING_ESCAPES, (c) => `\\${c}`) : s}"`;
}

/** Each field type's value as ILP text, as an expression of the value `v` (see lineEncoder). */
const fieldExpressions: Record<Exclude<ColumnType, "symbol">, string> = {
  string: "quote(v)",
  boolean: '(v ? "t" : "f")',
  double: "String(v)",
  long: 'v + "i"',
  // timestamp fields in microseconds
  timestamp: 'v.getTime() + "000t"',
};

export type LineEncoder = (row: Record<string, unknown>) => string;

/**
 * One table's line encoder: measurement, symbols (ILP wants them first), fields, then the
 * designated timestamp in nanoseconds. Null or absent values are left out (QuestDB stores NULL).
 * Values are assumed validated against the table (validate.ts).
 *
 * The encoder is generated once per table as straight-line code (one statement per column, its
 * escaped name a constant): a generic loop over the columns was a third slower on heartbeat
 * rows (3.6 against 2.7 us per heartbeat's four rows, encoded and turned into bytes). Only the
 * table definitions, never request data, go into the generated code, and each name goes in as a
 * JSON string literal.
 */
export function lineEncoder(name: string, table: TableDef): LineEncoder {
  const entries = Object.entries(table.columns);
  const lit = (s: string) => JSON.stringify(s);
  const get = (c: string) => `const v = row[${lit(c)}];`;
  let body = `let line = ${lit(escapeTag(name))};\n`;
  for (const [c, d] of entries)
    if (d.type === "symbol")
      body += `{ ${get(c)} if (v != null) line += ${lit(`,${escapeTag(c)}=`)} + tag(String(v)); }\n`;
  body += 'let sep = " ";\n';
  for (const [c, d] of entries) {
    if (d.type === "symbol") continue;
    const value = fieldExpressions[d.type];
    body += `{ ${get(c)} if (v != null) { line += sep + ${lit(`${escapeTag(c)}=`)} + ${value}; sep = ","; } }\n`;
  }
  body += 'return line + " " + row.ts.getTime() + "000000\\n";';
  const make = new Function("tag", "quote", `return (row) => {\n${body}\n};`) as (
    tag: (s: string) => string,
    quote: (s: string) => string,
  ) => LineEncoder;
  return make(escapeTag, quoteString);
}

/** QuestDB answered the write with an error about the data (4xx): retrying cannot help. */
export class IlpRejectedError extends Error {
  constructor(
    readonly statusCode: number,
    body: string,
  ) {
    super(`QuestDB rejected the write [statusCode=${statusCode}]: ${body.slice(0, 1000)}`);
    this.name = "IlpRejectedError";
  }
}

/** QuestDB refused the credentials: the store is unusable until the configuration changes. */
export class IlpAuthError extends Error {
  constructor(statusCode: number) {
    super(`QuestDB refused the credentials (HTTP ${statusCode}); check the user and password in QUESTDB_URL`);
    this.name = "IlpAuthError";
  }
}

/** Statuses after which the same request may succeed (as @questdb/nodejs-client retries). */
const RETRIABLE = new Set([500, 503, 504, 507, 509, 523, 524, 529, 599]);

export interface IlpHttpOptions {
  /** e.g. http://127.0.0.1:9000; user:pass@ for basic auth. */
  httpUrl: string;
  requestTimeoutMs: number;
  /** How long a failing request is retried before the error is returned. */
  retryTimeoutMs: number;
  connections: number;
}

/**
 * Sends ILP text to `/write` over a keep-alive connection pool. Resolves when QuestDB answered
 * 204: the rows are committed to the tables' WAL. Retrying is safe because every series table
 * deduplicates on its upsert key, so a request that committed but whose answer was lost
 * replaces its own rows when resent.
 */
export class IlpHttp {
  private readonly pool: Pool;
  private readonly headers: Record<string, string>;
  private readonly path = "/write?precision=n";

  constructor(private readonly opts: IlpHttpOptions) {
    const u = new URL(opts.httpUrl);
    this.pool = new Pool(u.origin, {
      connections: opts.connections,
      headersTimeout: opts.requestTimeoutMs,
      bodyTimeout: opts.requestTimeoutMs,
      keepAliveTimeout: 30_000,
    });
    this.headers = { "content-type": "text/plain; charset=utf-8" };
    if (u.username)
      this.headers.authorization = `Basic ${Buffer.from(
        `${decodeURIComponent(u.username)}:${decodeURIComponent(u.password)}`,
      ).toString("base64")}`;
  }

  async write(text: string): Promise<void> {
    const body = Buffer.from(text, "utf8");
    const deadline = Date.now() + this.opts.retryTimeoutMs;
    let delay = 10;
    for (;;) {
      let retriable: Error;
      try {
        const res = await this.pool.request({
          method: "POST",
          path: this.path,
          headers: this.headers,
          body,
        });
        if (res.statusCode === 204 || res.statusCode === 200) {
          await res.body.dump();
          return;
        }
        const answer = await res.body.text();
        if (res.statusCode === 401 || res.statusCode === 403) throw new IlpAuthError(res.statusCode);
        if (!RETRIABLE.has(res.statusCode)) throw new IlpRejectedError(res.statusCode, answer);
        retriable = new Error(`QuestDB answered ${res.statusCode}: ${answer.slice(0, 1000)}`);
      } catch (err) {
        if (err instanceof IlpRejectedError || err instanceof IlpAuthError) throw err;
        retriable = err as Error;
      }
      if (Date.now() + delay > deadline) throw retriable;
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 200);
    }
  }

  close(): Promise<void> {
    return this.pool.close();
  }
}
