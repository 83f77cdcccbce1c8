import { randomBytes } from "node:crypto";
import t from "tap";
import { sortTexts } from "../../src/lib/sort-texts.js";

/*
 * sortTexts must give exactly the order of Array.prototype.sort(): a heartbeat's id is a digest
 * of its parts sorted (otlp/ingest.ts), and an id that changed would store a resent export twice.
 */

const defaultOrder = (texts: string[]) => [...texts].sort();

t.test("the default sort's order, whatever the texts", async (t) => {
  const digest = () => randomBytes(24).toString("base64url");
  const cases: [string, string[]][] = [
    [
      "OTLP parts: digests with start and time",
      Array.from({ length: 60 }, () => `${digest()}:1764340000000000000:1764340010000000000`),
    ],
    [
      "shared first four characters, different lengths and ends",
      ["abcd", "abcde", "abcd\u0000", "abc", "abcdz", "abcdA", "abcd-", "ab", "a", "", "abcd", "abce"],
    ],
    ["duplicates", Array.from({ length: 40 }, (_, i) => `series-${i % 7}`)],
    [
      "non-ASCII beginnings (the default sort is taken)",
      ["é-1", "e-1", "z", "Ω", "a😀", "a\uD83D", "\u00ff", "abc", "abd", "abe"],
    ],
    [
      "non-ASCII after the first four characters",
      Array.from(
        { length: 30 },
        (_, i) => `pref${String.fromCharCode(0x41 + (i % 5))}${i % 2 ? "é" : "Ω"}${i}`,
      ),
    ],
    [
      "control characters and the ends of ASCII",
      ["\u0000", "\u007f", "\u0001a", "~~~~", "!!!!", " ", "\u007f\u007f\u007f\u007f\u007f", "0", "9", "a"],
    ],
    ["a few (under the native path's threshold)", ["b", "a", "c"]],
    ["none", []],
  ];
  for (const [name, texts] of cases) t.same(sortTexts(texts), defaultOrder(texts), name);

  // random short texts over a small alphabet: many equal prefixes, many lengths
  const alphabet = ["a", "b", "-", "_", "A", "0", ":", "\u0000", "\u007f", "é"];
  for (let round = 0; round < 200; round++) {
    const n = 1 + Math.floor(Math.random() * 80);
    const texts = Array.from({ length: n }, () => {
      const len = Math.floor(Math.random() * 7);
      let s = "";
      for (let i = 0; i < len; i++) s += alphabet[Math.floor(Math.random() * alphabet.length)];
      return s;
    });
    const got = sortTexts(texts);
    if (JSON.stringify(got) !== JSON.stringify(defaultOrder(texts))) {
      t.fail(`random round ${round}: ${JSON.stringify(texts)}`);
      return;
    }
  }
  t.pass("200 random lists of short texts sorted as the default sort does");
});

t.test("the input is left as it was", async (t) => {
  const texts = Array.from({ length: 20 }, (_, i) => `t${(i * 7) % 20}`);
  const copy = [...texts];
  sortTexts(texts);
  t.same(texts, copy);
});
