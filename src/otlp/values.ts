import type { Attributes, AttributeValue } from "./types.js";
import type { PbAnyValue, PbInt64, PbKeyValue } from "./wire.js";

/** An int64 (signed or not, as the Long says) as a bigint. */
export function toBigInt(v: PbInt64): bigint {
  if (typeof v === "number") return BigInt(v);
  const bits = (BigInt(v.high >>> 0) << 32n) | BigInt(v.low >>> 0);
  return v.unsigned ? bits : BigInt.asIntN(64, bits);
}

/**
 * Times (fixed64 nanoseconds) as bigints, as toBigInt, remembering the last one: the points of an
 * export mostly share their start and their time, and get the same bigint for them (fewer
 * objects; equal times compare without reading their digits apart). One for starts, one for times.
 */
export class TimeConverter {
  private low = 0;
  private high = 0;
  private unsigned = false;
  private value: bigint | null = null;

  toBigInt(v: PbInt64): bigint {
    if (typeof v === "number") return BigInt(v);
    if (this.value !== null && v.low === this.low && v.high === this.high && v.unsigned === this.unsigned)
      return this.value;
    this.low = v.low;
    this.high = v.high;
    this.unsigned = v.unsigned;
    this.value = toBigInt(v);
    return this.value;
  }
}

/**
 * An int64 as a number: exact within ±(2^53 − 1), rounded beyond (check with isSafeInteger on the
 * result: the parts add exactly below 2^53, and a rounded sum is never a safe integer).
 */
export function toNumber(v: PbInt64): number {
  if (typeof v === "number") return v;
  return (v.unsigned ? v.high >>> 0 : v.high) * 4294967296 + (v.low >>> 0);
}

/** Lowercase hex of an id's bytes ("" when unset: protobufjs' default is then an empty array). */
export function toHex(bytes: Uint8Array | number[]): string {
  if (bytes.length === 0) return "";
  return (Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes)).toString("hex");
}

/** Deeper values than this are refused rather than walked (no attribute needs it). */
export const MAX_ATTRIBUTE_DEPTH = 32;

export class AttributeDepthError extends Error {}

/**
 * Attributes as a plain object. Not `Object.create(null)`: V8 keeps such objects as hash tables,
 * and every point's attributes are read and compared several times (map.ts); plain objects of the
 * same keys share one shape. A key `__proto__` is defined as an own property, never taken as the
 * prototype; readers look up the names they want and iterate own keys only.
 */
export function toAttributes(list: PbKeyValue[], depth = 0): Attributes {
  const out: Attributes = {};
  for (const kv of list) {
    const value = toAttributeValue(kv.value, depth);
    if (kv.key === "__proto__")
      Object.defineProperty(out, kv.key, { value, enumerable: true, writable: true, configurable: true });
    else out[kv.key] = value;
  }
  return out;
}

function toAttributeValue(v: PbAnyValue | null, depth: number): AttributeValue {
  if (v === null) return null;
  if (depth >= MAX_ATTRIBUTE_DEPTH) throw new AttributeDepthError();
  switch (v.value) {
    case "stringValue":
      return v.stringValue;
    case "boolValue":
      return v.boolValue;
    case "intValue": {
      const n = toNumber(v.intValue);
      return Number.isSafeInteger(n) ? n : toBigInt(v.intValue);
    }
    case "doubleValue":
      return v.doubleValue;
    case "arrayValue":
      return (v.arrayValue?.values ?? []).map((item) => toAttributeValue(item, depth + 1));
    case "kvlistValue":
      return toAttributes(v.kvlistValue?.values ?? [], depth + 1);
    case "bytesValue":
      return Uint8Array.from(v.bytesValue); // a copy: a decoded Buffer is a view of the request body
    default:
      // unset, or string_value_strindex (a profiles-only dictionary reference)
      return null;
  }
}
