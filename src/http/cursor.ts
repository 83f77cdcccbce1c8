import { createHash, createHmac, hkdfSync, timingSafeEqual } from "node:crypto";
import { z } from "zod";
import { ServiceError } from "../core/errors.js";
import type { Position } from "../core/page.js";
import { perApp } from "../core/context.js";

/**
 * Opaque, tamper-evident keyset cursors for the read API: the position of the last row
 * returned (its time and key) plus a fingerprint of the query (endpoint and filters), signed
 * with HMAC-SHA256 under a key derived from VIGIL_SECRET. A forged or altered cursor, or one
 * taken from another query, is a 400; a valid one continues exactly after the last row, so
 * rows arriving meanwhile are neither repeated nor skipped.
 *
 * Cursors exist only at the REST edge: queries take and return plain positions (core/page.ts),
 * and `paging.ts` signs them into `next_cursor` and back. The key derivation is unchanged, so
 * cursors issued before this codec moved here stay valid.
 */
export class CursorCodec {
  private readonly key: Buffer;

  constructor(secret: string) {
    this.key = Buffer.from(hkdfSync("sha256", secret, "vigil", "read cursors v1", 32));
  }

  static fingerprint(query: Record<string, unknown>): string {
    const keys = Object.keys(query).sort();
    return createHash("sha256")
      .update(JSON.stringify(keys.map((k) => [k, query[k] ?? null])))
      .digest("base64url")
      .slice(0, 16);
  }

  encode(position: Position, fingerprint: string): string {
    const payload = Buffer.from(
      JSON.stringify({ t: position.ts.getTime(), k: position.key, q: fingerprint }),
    ).toString("base64url");
    return `${payload}.${this.sign(payload)}`;
  }

  decode(cursor: string, fingerprint: string): Position {
    const bad = (why: string) =>
      new ServiceError("invalid_input", `cursor: ${why}; start again without a cursor`, {
        field: "cursor",
        reason: "invalid_cursor",
        details: { parameter: "cursor" },
      });
    const [payload, sig] = cursor.split(".");
    if (!payload || !sig || cursor.length > 2048) throw bad("not a cursor this API issued");
    const expected = Buffer.from(this.sign(payload));
    const given = Buffer.from(sig);
    if (expected.length !== given.length || !timingSafeEqual(expected, given))
      throw bad("signature does not match");
    const parsed = z.object({ t: z.number().int(), k: z.array(z.string()), q: z.string() }).safeParse(
      (() => {
        try {
          return JSON.parse(Buffer.from(payload, "base64url").toString("utf8"));
        } catch {
          return null;
        }
      })(),
    );
    if (!parsed.success) throw bad("not a cursor this API issued");
    if (parsed.data.q !== fingerprint)
      throw bad("it belongs to a different query (endpoint or filters changed)");
    return { ts: new Date(parsed.data.t), key: parsed.data.k };
  }

  private sign(payload: string): string {
    return createHmac("sha256", this.key).update(payload).digest("base64url").slice(0, 22);
  }
}

/** This app's cursor codec, keyed by the current master secret. */
export const cursorCodec = perApp((ctx) => new CursorCodec(ctx.secrets.current));
