import type { Sender } from "@questdb/nodejs-client";

/**
 * @questdb/nodejs-client 4.x escapes table names, column names, symbols and strings one
 * character at a time, with a separate Buffer.write per character; on heartbeat rows (long
 * UUID symbols, JSON strings) that loop was a quarter of the ingest path's CPU. Every caller
 * has already reserved buffer capacity for the whole string, so a string with nothing to
 * escape can be written in one call with identical bytes. Anything that needs escaping goes
 * through the client's own code. test/stores/ilp-escape.test.ts checks the bytes match.
 */
const NEEDS_ESCAPE = /[ ,=\n\r"\\]/;
const PATCHED = Symbol.for("vigil.ilp.fastEscape");

type EscapingBuffer = {
  write(data: string): void;
  writeEscaped(data: string, quoted?: boolean): void;
  [PATCHED]?: (data: string, quoted?: boolean) => void;
};

/** Installs the fast path on the sender's buffer class; returns the client's original function. */
export function installFastEscape(sender: Sender): ((data: string, quoted?: boolean) => void) | undefined {
  let proto = Object.getPrototypeOf(
    (sender as unknown as { buffer: object }).buffer,
  ) as EscapingBuffer | null;
  while (proto && !Object.hasOwn(proto, "writeEscaped"))
    proto = Object.getPrototypeOf(proto) as EscapingBuffer | null;
  if (!proto) return undefined;
  if (proto[PATCHED]) return proto[PATCHED];
  const original = proto.writeEscaped;
  proto[PATCHED] = original;
  proto.writeEscaped = function (this: EscapingBuffer, data: string, quoted = false) {
    if (NEEDS_ESCAPE.test(data)) original.call(this, data, quoted);
    else this.write(data);
  };
  return original;
}
