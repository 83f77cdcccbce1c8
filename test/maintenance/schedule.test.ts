import t from "tap";
import {
  bounds,
  fromWall,
  isTimeZone,
  nextSpan,
  occurrences,
  parseRule,
  type Recurrence,
  recurrenceCovers,
  RuleTooCostly,
  toWall,
} from "../../src/maintenance/schedule.js";

/**
 * Recurring windows in a time zone (src/maintenance/schedule.ts): wall clock to instants with the
 * RFC 5545 rules for DST gaps and overlaps, whatever the process's own zone; rules that never
 * occur refused quickly.
 */

const wall = (s: string) => Date.parse(`${s}Z`);
const iso = (ms: number) => new Date(ms).toISOString();

t.test("wall clock and instants", async (t) => {
  const ny = "America/New_York";
  t.equal(iso(fromWall(wall("2026-01-15T02:00:00"), ny)), "2026-01-15T07:00:00.000Z", "EST is UTC-5");
  t.equal(iso(fromWall(wall("2026-07-15T02:00:00"), ny)), "2026-07-15T06:00:00.000Z", "EDT is UTC-4");
  t.equal(
    iso(fromWall(wall("2026-03-08T02:30:00"), ny)),
    "2026-03-08T07:30:00.000Z",
    "a skipped time is read with the offset before the change (03:30 EDT)",
  );
  t.equal(
    iso(fromWall(wall("2026-11-01T01:30:00"), ny)),
    "2026-11-01T05:30:00.000Z",
    "a time that happens twice is its first occurrence (EDT)",
  );
  t.equal(
    iso(toWall(Date.parse("2026-11-01T06:30:00Z"), ny)),
    "2026-11-01T01:30:00.000Z",
    "the second 01:30",
  );
  t.equal(
    iso(fromWall(wall("2026-06-01T12:00:00"), "Asia/Kolkata")),
    "2026-06-01T06:30:00.000Z",
    "half hours",
  );
  t.ok(isTimeZone("Europe/Paris"));
  t.ok(isTimeZone("UTC"));
  t.notOk(isTimeZone("Mars/Olympus_Mons"));
  t.notOk(isTimeZone("EST"), "an abbreviation does not follow a place's rules");
  t.notOk(isTimeZone("+02:00"));
});

t.test("occurrences do not depend on the process's own time zone", async (t) => {
  const rec: Recurrence = {
    rrule: "FREQ=WEEKLY;BYDAY=SU;BYHOUR=2;BYMINUTE=0",
    dtstart: "2026-03-01T00:00:00",
    timezone: "America/New_York",
    durationMinutes: 60,
  };
  const from = new Date("2026-03-01T00:00:00Z");
  const to = new Date("2026-03-23T00:00:00Z");
  const expected = [
    "2026-03-01T07:00:00.000Z",
    "2026-03-08T07:00:00.000Z",
    "2026-03-15T06:00:00.000Z",
    "2026-03-22T06:00:00.000Z",
  ];
  const saved = process.env.TZ;
  t.teardown(() => {
    process.env.TZ = saved;
  });
  for (const tz of ["UTC", "Pacific/Auckland", "America/Los_Angeles"]) {
    process.env.TZ = tz;
    // another rule text each time, so the cache does not answer
    const r = {
      ...rec,
      rrule: `${rec.rrule};WKST=${tz === "UTC" ? "MO" : tz === "Pacific/Auckland" ? "TU" : "WE"}`,
    };
    t.same(
      occurrences(r, from, to).map((s) => s.start.toISOString()),
      expected,
      `process TZ=${tz}`,
    );
  }
});

t.test("UNTIL in UTC bounds the schedule at that instant", async (t) => {
  const rec: Recurrence = {
    rrule: parseRule("freq=daily;byhour=23;byminute=0;until=20260105T040000Z"),
    dtstart: "2026-01-01T00:00:00",
    timezone: "America/New_York",
    durationMinutes: 30,
  };
  // 23:00 EST is 04:00 UTC the next day: the occurrence of Jan 4 (at 2026-01-05T04:00Z) is the last
  const b = bounds(rec, new Date("2026-01-02T00:00:00Z"));
  t.equal(b.first?.toISOString(), "2026-01-02T04:00:00.000Z");
  t.equal(b.lastEnd?.toISOString(), "2026-01-05T04:30:00.000Z");
  t.equal(recurrenceCovers(rec, new Date("2026-01-05T04:10:00Z")), true);
  t.equal(recurrenceCovers(rec, new Date("2026-01-06T04:10:00Z")), false);
  t.equal(bounds(rec, new Date("2026-01-06T00:00:00Z")).nextEndingAfterNow, null, "nothing left after it");
});

t.test("occurrences longer than the interval overlap", async (t) => {
  const rec: Recurrence = {
    rrule: "FREQ=HOURLY;INTERVAL=6",
    dtstart: "2026-01-01T00:00:00",
    timezone: "UTC",
    durationMinutes: 7 * 60,
  };
  t.equal(recurrenceCovers(rec, new Date("2026-01-01T06:30:00Z")), true);
  t.equal(recurrenceCovers(rec, new Date("2026-01-10T05:59:00Z")), true, "every instant is covered");
  t.equal(
    nextSpan(rec, new Date("2026-01-01T06:30:00Z"))?.start.toISOString(),
    "2026-01-01T00:00:00.000Z",
    "the one under way",
  );
});

t.test("rules", async (t) => {
  t.equal(parseRule("RRULE:freq=weekly;byday=su"), "FREQ=WEEKLY;BYDAY=SU");
  for (const bad of [
    "",
    "FREQ=SOMETIMES",
    "BYDAY=MO",
    "FREQ=DAILY;FREQ=WEEKLY",
    "FREQ=SECONDLY",
    "FREQ=DAILY;COUNT=2;UNTIL=20300101",
    "FREQ=DAILY;TZID=UTC",
    "FREQ=DAILY;UNTIL=tomorrow",
    "FREQ=DAILY;BYHOUR=25",
  ])
    t.throws(() => parseRule(bad), { name: "RuleError" }, `refused: ${JSON.stringify(bad)}`);

  const never = (rrule: string) => ({
    rrule,
    dtstart: "2026-01-01T00:00:00",
    timezone: "UTC",
    durationMinutes: 60,
  });
  // a rule that never occurs: rrule searches to the year 9999 (about 0.3 s for a yearly one on an
  // idle machine, seconds for a daily one); either it finds nothing or the CPU budget gives up, and
  // both are the same 400 for the user (windows.ts). A rule that occurs answers in microseconds.
  for (const freq of ["YEARLY", "DAILY", "HOURLY"]) {
    const started = Date.now();
    try {
      const b = bounds(
        never(`FREQ=${freq};BYMONTH=2;BYMONTHDAY=${freq === "YEARLY" ? 31 : 30}`),
        new Date("2026-01-01T00:00:00Z"),
      );
      t.equal(b.first, null, `${freq}: never`);
    } catch (err) {
      t.type(err, RuleTooCostly, `${freq}: given up`);
    }
    t.ok(Date.now() - started < 3_000, `${freq}: answered quickly (rrule alone searches to the year 9999)`);
  }
});
