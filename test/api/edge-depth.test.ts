import fc from "fast-check";
import t from "tap";
import { fewOpeners, jsonDepth, MAX_JSON_DEPTH, parseJsonBody } from "../../src/http/edge.js";

/** Any JSON value, nested up to 40 levels, with brackets inside strings too. */
const json = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    fc.constantFrom(1, "x", "{[", "]}", '"{', null, true),
    fc.array(tie("value"), { maxLength: 4 }),
    fc.dictionary(fc.string({ maxLength: 3 }), tie("value"), { maxKeys: 4 }),
  ),
})).value;

t.test("few openers bound the depth, so the scan can be skipped", async () => {
  fc.assert(
    fc.property(json, fc.integer({ min: 0, max: 40 }), (v, n) => {
      const text = JSON.stringify(v);
      // the shortcut may only say "shallow enough" when the scan agrees
      return !fewOpeners(text, n) || jsonDepth(text) <= n;
    }),
    { numRuns: 2000 },
  );
});

t.test("the depth limit holds whichever way the check goes", async (t) => {
  const nested = (d: number) => `${'{"a":'.repeat(d)}1${"}".repeat(d)}`;
  t.ok(parseJsonBody(nested(MAX_JSON_DEPTH)), `${MAX_JSON_DEPTH} levels: parsed`);
  t.throws(() => parseJsonBody(nested(MAX_JSON_DEPTH + 1)), /nested deeper than 32 levels/, "33: refused");
  // many brackets, little depth: the shortcut does not apply and the scan accepts it
  const wide = JSON.stringify(Array.from({ length: 100 }, () => ({ a: [1] })));
  t.notOk(fewOpeners(wide, MAX_JSON_DEPTH), "201 openers: the scan decides");
  t.ok(parseJsonBody(wide), "wide but 3 levels deep: parsed");
  // brackets inside strings count for the shortcut, never for the depth
  const strings = JSON.stringify({ s: "[".repeat(100) });
  t.ok(parseJsonBody(strings), "brackets in a string: parsed");
  // deep, with the openers past the shortcut's limit
  const deep = `${"[".repeat(MAX_JSON_DEPTH + 1)}${"]".repeat(MAX_JSON_DEPTH + 1)}`;
  t.throws(() => parseJsonBody(deep), /nested deeper/, "33 arrays: refused");
});
