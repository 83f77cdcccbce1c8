import fc from "fast-check";
import t from "tap";
import { isoOf } from "../../src/ingest/heartbeat.js";

/*
 * A heartbeat's identity hashes its period's times written as ISO 8601 (toISOString). `isoOf`
 * takes the text the daemon sent instead when it already is that string; it must give exactly
 * toISOString's answer for every way a time can be written, or a resent period would get a new id.
 */

const pad = (n: number, w: number) => String(n).padStart(w, "0");

t.test("isoOf(d, text) is d.toISOString() for every rendering of the same instant", async (t) => {
  // a day inside the accepted range, so the same instant written at a ±14 h offset stays in it
  const earliest = Date.UTC(1970, 0, 2);
  const latest = Date.UTC(9999, 11, 30, 23, 59, 59, 999);
  fc.assert(
    fc.property(
      fc.integer({ min: earliest, max: latest }),
      fc.constantFrom("iso", "noMillis", "offset", "micros", "lowerZ"),
      fc.integer({ min: -14, max: 14 }),
      (ms, form, hours) => {
        const d = new Date(ms);
        const iso = d.toISOString();
        let text = iso;
        if (form === "noMillis") text = `${iso.slice(0, 19)}Z`;
        if (form === "micros") text = `${iso.slice(0, 23)}000Z`;
        if (form === "lowerZ") text = `${iso.slice(0, 23)}z`;
        if (form === "offset") {
          const local = new Date(ms + hours * 3_600_000).toISOString();
          const sign = hours < 0 ? "-" : "+";
          text = `${local.slice(0, 23)}${sign}${pad(Math.abs(hours), 2)}:00`;
        }
        const parsed = new Date(text);
        return isoOf(parsed, text) === parsed.toISOString();
      },
    ),
    { numRuns: 2000, seed: 17 },
  );
  t.pass("2,000 generated instants and renderings agree");
});

t.test("a canonical-looking text of another instant is never taken as is", async (t) => {
  const d = new Date("2026-03-02T00:00:00.000Z");
  // the same instant written as an impossible date must not be echoed back
  t.equal(isoOf(d, "2026-02-30T00:00:00.000Z"), "2026-03-02T00:00:00.000Z");
  t.equal(
    isoOf(new Date("2026-01-02T00:00:00.000Z"), "2026-01-01T24:00:00.000Z"),
    "2026-01-02T00:00:00.000Z",
  );
  t.equal(isoOf(d, "2026-03-02T00:00:00.000Z"), "2026-03-02T00:00:00.000Z");
  t.equal(
    isoOf(new Date(Date.UTC(2024, 1, 29, 23, 59, 59, 7)), "2024-02-29T23:59:59.007Z"),
    "2024-02-29T23:59:59.007Z",
  );
});
