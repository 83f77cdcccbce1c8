import fc from "fast-check";

/**
 * The awkward values the fuzz suite sends: text the stores cannot hold or that looks like
 * something else, numbers at and past every bound, dates that do not exist, ids in odd forms,
 * deep documents, wrong types. Each is an arbitrary, so fast-check picks, mixes and shrinks them.
 */

/** A literal written into a JSON text as is: `1e400`, `-0`, a 30-digit integer. */
export class RawJson {
  constructor(readonly text: string) {}
  toJSON(): string {
    return `<raw ${this.text.slice(0, 40)}>`;
  }
}

/** An object written with a key more than once (`{"a":1,"a":2}`), which JSON.parse keeps the last of. */
export class DupKeys {
  constructor(readonly entries: [string, unknown][]) {}
}

/** The JSON text of a value that may hold RawJson and DupKeys parts (undefined fields are left out). */
export function jsonText(v: unknown): string {
  if (v instanceof RawJson) return v.text;
  if (v instanceof DupKeys)
    return `{${v.entries.map(([k, x]) => `${JSON.stringify(k)}:${jsonText(x)}`).join(",")}}`;
  if (Array.isArray(v))
    return `[${Array.from(v, (x) => (x === undefined ? "null" : jsonText(x))).join(",")}]`;
  if (v !== null && typeof v === "object")
    return `{${Object.entries(v)
      .filter(([, x]) => x !== undefined)
      .map(([k, x]) => `${JSON.stringify(k)}:${jsonText(x)}`)
      .join(",")}}`;
  if (typeof v === "number" && Object.is(v, -0)) return "-0";
  return JSON.stringify(v) ?? "null";
}

/** A document `depth` arrays or objects deep around `leaf`, built without recursion. */
export function nested(depth: number, kind: "array" | "object", leaf = "1"): RawJson {
  return kind === "array"
    ? new RawJson(`${"[".repeat(depth)}${leaf}${"]".repeat(depth)}`)
    : new RawJson(`${'{"a":'.repeat(depth)}${leaf}${"}".repeat(depth)}`);
}

// --- text ---

export const ODD_TEXT = [
  "",
  " ",
  "   padded   ",
  "\t",
  "\u0000",
  "a\u0000b",
  "\ud800",
  "x\udc00y",
  "\ud83d",
  "end\ud83d",
  "\uffff",
  "\ufffe",
  "\ufeffbom",
  "\u202eevil\u202c",
  "\u05e9\u05dc\u05d5\u05dd", // RTL text
  "e\u0301\u0301\u0301\u0301",
  "Z\u0351\u0308\u036b\u0306\u0307\u0350",
  "👩‍👩‍👧‍👦",
  "🧪🔥💥",
  "\u0001\u0002\u001b[31m\u001f\u007f\u0085",
  "\r\n",
  "line\nbreak",
  "\u2028\u2029",
  "\u00a0\u200b\u200d",
  "İıß\ufb03Ω",
  "%00",
  "%",
  "%zz",
  "%ED%A0%80",
  "'; DROP TABLE connections; --",
  "\\",
  '"',
  "\\u0000",
  "<script>alert(1)</script>",
  "${jndi:ldap://x}",
  "{{7*7}}",
  "null",
  "undefined",
  "true",
  "[]",
  "{}",
  "__proto__",
  "constructor",
  "../../etc/passwd",
  "a".repeat(64),
  "a".repeat(65),
  "a".repeat(200),
  "a".repeat(201),
  "é".repeat(201),
  "a".repeat(1000),
  "a".repeat(1001),
  "a".repeat(2049),
  "a".repeat(4097),
] as const;

/** Any UTF-16 code unit, surrogate halves included. */
const codeUnit = fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c));

export const oddText: fc.Arbitrary<string> = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom(...ODD_TEXT) },
  { weight: 2, arbitrary: fc.string({ unit: codeUnit, maxLength: 24 }) },
  { weight: 2, arbitrary: fc.string({ unit: "grapheme", maxLength: 24 }) },
  { weight: 1, arbitrary: fc.string({ unit: "binary", maxLength: 24 }) },
  { weight: 1, arbitrary: fc.constantFrom(70_000, 300_000).map((n) => "x".repeat(n)) },
);

// --- numbers ---

export const ODD_NUMBERS = [
  0,
  -0,
  1,
  -1,
  0.5,
  0.1 + 0.2,
  0.001,
  0.005,
  99.999,
  1e308,
  -1e308,
  Number.MAX_VALUE,
  Number.MIN_VALUE,
  2 ** 31,
  2 ** 53,
  2 ** 53 + 2,
  2 ** 63,
  2 ** 64,
  -(2 ** 63),
  1e10,
  1e10 + 1,
  1e12,
  1e12 + 1,
  1e15,
  1e21,
  86_400,
  86_401,
  3_600_000,
  3_600_001,
  10_000_000,
  10_000_000.01,
  100_000_000,
  100_000_001,
] as const;

/** Number literals JSON allows but JavaScript cannot hold as written. */
export const RAW_NUMBERS = [
  "1e400",
  "-1e400",
  "1e-400",
  "-0.0",
  "0e0",
  "1E+2",
  "123456789012345678901234567890",
  "-123456789012345678901234567890",
  "0.30000000000000000000000000001",
] as const;

export const oddNumber: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom(...ODD_NUMBERS) },
  { weight: 2, arbitrary: fc.constantFrom(...RAW_NUMBERS).map((t) => new RawJson(t)) },
  { weight: 2, arbitrary: fc.double({ noNaN: true, noDefaultInfinity: true }) },
  { weight: 1, arbitrary: fc.integer() },
);

/** Numbers as a query string carries them. */
export const NUMERIC_TEXT = [
  "0",
  "-0",
  "1",
  "-1",
  "1.5",
  "+1",
  " 1",
  "1 ",
  "01",
  "0x10",
  "1e3",
  "1e308",
  "NaN",
  "Infinity",
  "-Infinity",
  "1_000",
  "99",
  "100",
  "101",
  "1000",
  "1001",
  "2147483648",
  "9007199254740993",
  "99999999999999999999999",
  "1000000000",
  "1000000001",
  "١٢",
] as const;

// --- dates ---

export const ODD_DATES = [
  "2026-02-30T00:00:00Z",
  "2026-02-29T00:00:00Z",
  "2024-02-29T00:00:00Z",
  "0000-01-01T00:00:00Z",
  "0001-01-01T00:00:00Z",
  "1000-01-01T00:00:00Z",
  "1969-12-31T23:59:59Z",
  "1970-01-01T00:00:00Z",
  "9999-12-31T23:59:59.999Z",
  "9999-12-31T23:59:59-23:59",
  "0000-01-01T00:00:00+23:59",
  "99999-01-01T00:00:00Z",
  "+275760-09-13T00:00:00.000Z",
  "+275760-09-13T00:00:00.001Z",
  "-000001-01-01T00:00:00Z",
  "2026-01-05",
  "2026-01-05T00:00:00",
  "2026-01-05T24:00:00Z",
  "2026-01-05T23:59:60Z",
  "2026-13-01T00:00:00Z",
  "2026-01-05T00:00:00+14:00",
  "2026-01-05T00:00:00+24:00",
  "2026-01-05T00:00:00.123456789Z",
  "2026-01-05T00:00:00.0000000000000000000000001Z",
  "2026-01-05 00:00:00Z",
  "2026-01-05T00:00:00z",
  "1700000000",
  "now",
  "",
] as const;

export const oddDate: fc.Arbitrary<string> = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...ODD_DATES) },
  {
    weight: 1,
    arbitrary: fc
      .date({ min: new Date(-8.64e15), max: new Date(8.64e15), noInvalidDate: true })
      .map((d) => d.toISOString()),
  },
);

// --- ids ---

/** A UUID as a careless or hostile client may write it. */
export function oddId(id: string): fc.Arbitrary<string> {
  return fc.oneof(
    { weight: 3, arbitrary: fc.constantFrom(id.toUpperCase(), id) },
    { weight: 2, arbitrary: fc.mixedCase(fc.constant(id)) },
    {
      weight: 3,
      arbitrary: fc.constantFrom(
        `{${id}}`,
        id.replaceAll("-", ""),
        ` ${id}`,
        `${id} `,
        `urn:uuid:${id}`,
        `${id}0`,
        id.slice(0, -1),
        `${id}\u0000`,
        id.replace(/a/g, "\u0430"), // Cyrillic look-alike
        id.replace(/\d/g, (d) => String.fromCharCode(0xff10 + Number(d))), // full-width digits
        "00000000-0000-0000-0000-000000000000",
        "ffffffff-ffff-ffff-ffff-ffffffffffff",
        "FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF",
        "00000000-0000-4000-8000-000000000000",
      ),
    },
    { weight: 1, arbitrary: fc.uuid() },
  );
}

// --- shapes ---

export const ODD_SHAPES: unknown[] = [
  null,
  true,
  false,
  0,
  "",
  [],
  {},
  [[]],
  [null],
  { a: {} },
  nested(31, "array"),
  nested(32, "object"),
  nested(33, "array"),
  nested(200, "object"),
  nested(5000, "array"),
  new DupKeys([
    ["a", 1],
    ["a", 2],
  ]),
];

/** Any of the above, or plain JSON: the value put where a field's value should be. */
export const oddValue: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 4, arbitrary: oddText },
  { weight: 3, arbitrary: oddNumber },
  { weight: 1, arbitrary: oddDate },
  { weight: 2, arbitrary: fc.constantFrom(...ODD_SHAPES) },
  { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
);

/** Query parameter names nobody documented. */
export const ODD_PARAM_NAMES = [
  "x",
  "__proto__",
  "constructor",
  "prototype",
  "a[b]",
  "limit[]",
  "LIMIT",
  "",
  "%00",
  "\u0000",
  "é",
  "🧪",
  "access_token",
  "connection_id ",
] as const;
