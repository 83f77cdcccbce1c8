import t from "tap";
import {
  heartbeatGapFill,
  heartbeatSample,
  probeGapFill,
  probeSample,
} from "../../src/availability/samples.js";

const at = new Date("2026-11-20T10:00:00Z");
const minutesAgo = (m: number) => new Date(at.getTime() - m * 60_000);

t.test("probe samples and the probe's gap-fill", async (t) => {
  t.match(
    probeSample("c1", { available: false, responseTimeMs: 12, statusCode: 503, reason: "http_status" }, at),
    {
      ts: at,
      available: false,
      status_code: 503,
      reason: "http_status",
      error: null,
      synthetic: false,
      source: "probe",
    },
  );
  const gap = (status: string, dueMinutesAgo: number) =>
    probeGapFill({ connectionId: "c1", status, dueAt: minutesAgo(dueMinutesAgo), intervalMs: 30_000, at });
  t.same(gap("active", 0.5), [], "a check less than 1.5 intervals late fills nothing");
  t.same(gap("inactive", 10), [], "an inactive connection has no last known state");
  const rows = gap("active", 5);
  t.equal(rows.length, 10, "one per missed 30 s slot, the current one excluded");
  t.ok(
    rows.every((r) => r.available && r.synthetic && r.reason === "not_checked" && r.source === "gap_fill"),
  );
  t.ok(
    gap("error", 5).every((r) => !r.available),
    "an erroring connection stays unavailable",
  );
  t.equal(gap("active", 3 * 24 * 60).length, 2880, "at most a day's worth");
});

t.test("heartbeat samples and a silent gateway's gap-fill", async (t) => {
  const h = { connectionId: "g1", ts: at, received: at, latencyMs: 9 };
  t.match(heartbeatSample({ ...h, status: "healthy", pidAlive: true }), { available: true, reason: null });
  t.match(heartbeatSample({ ...h, status: "healthy", pidAlive: false }), {
    available: false,
    reason: "process_down",
  });
  t.match(heartbeatSample({ ...h, status: "degraded", pidAlive: true }), {
    available: false,
    reason: "gateway_unhealthy",
    error: "gateway status degraded",
  });
  t.equal(
    heartbeatSample({ ...h, ts: minutesAgo(25 * 60), status: "healthy", pidAlive: true }),
    null,
    "no sample for a period that ended over a day ago",
  );
  const fill = (now: Date) =>
    heartbeatGapFill({ connectionId: "g1", lastHeartbeatAt: minutesAgo(10), intervalMs: 60_000, at: now });
  const rows = fill(at);
  t.equal(rows.length, 10, "one per missed 60 s slot up to now");
  t.ok(rows.every((r) => !r.available && r.reason === "missed_heartbeat" && r.synthetic));
  const later = fill(new Date(at.getTime() + 20_000));
  t.same(
    later.map((r) => r.ts.getTime()),
    rows.map((r) => r.ts.getTime()),
    "slots derive from the last heartbeat: a later run writes the same keys",
  );
});
