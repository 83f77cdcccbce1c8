import t from "tap";
import { judge } from "../../src/anomalies/baselines.js";
import { windowStart } from "../../src/anomalies/detect.js";
import { ConfigError, loadConfig } from "../../src/config.js";

t.test("median and MAD, with a floor on the scale", async (t) => {
  const j = judge("response_time", 600, [100, 108, 116, 104, 112, 100, 108], 3.5, 5);
  t.match(j, { median: 108, mad: 4, scale: 10.8, outside: true });
  t.equal(j?.high, 108 + 3.5 * 10.8);
  t.equal(j?.score, (600 - 108) / 10.8);

  const flat = judge("failure_rate", 0.1, [0, 0, 0, 0, 0, 0, 0], 3.5, 5);
  t.match(flat, { median: 0, mad: 0, scale: 0.05, outside: false }, "a flat baseline: the absolute floor");
  t.equal(judge("failure_rate", 0.2, [0, 0, 0, 0, 0], 3.5, 5)?.outside, true, "past median + 3.5 · 0.05");

  const spread = judge("token_spend", 30, [10, 20, 10, 20, 10, 20, 10], 3.5, 5);
  t.equal(spread?.mad, 0, "four of seven alike: MAD 0, so the 10% floor of the median decides");
  t.equal(spread?.scale, 1);
  t.equal(
    judge("response_time", 50, [100, 100, 100, 100, 100], 3.5, 5)?.outside,
    false,
    "only increases alarm",
  );
});

t.test("minimum data: fewer baseline hours than required never alarm", async (t) => {
  t.equal(judge("response_time", 10_000, [100, 100, 100, 100], 3.5, 5), null);
  t.not(judge("response_time", 10_000, [100, 100, 100, 100, 100], 3.5, 5), null);
});

t.test("the window: the last hour that ended at least 2 minutes ago", async (t) => {
  t.equal(windowStart(new Date("2026-11-10T05:05:00Z")).toISOString(), "2026-11-10T04:00:00.000Z");
  t.equal(windowStart(new Date("2026-11-10T05:01:00Z")).toISOString(), "2026-11-10T03:00:00.000Z");
});

t.test("configuration", async (t) => {
  t.same(loadConfig({}).anomalies, { intervalSeconds: 300, windows: 2, threshold: 3.5, minBaselineHours: 5 });
  t.same(
    loadConfig({
      ANOMALY_INTERVAL_SECONDS: "60",
      ANOMALY_WINDOWS: "3",
      ANOMALY_THRESHOLD: "4.5",
      ANOMALY_MIN_BASELINE_HOURS: "7",
    }).anomalies,
    { intervalSeconds: 60, windows: 3, threshold: 4.5, minBaselineHours: 7 },
  );
  for (const [variable, value] of [
    ["ANOMALY_INTERVAL_SECONDS", "0"],
    ["ANOMALY_WINDOWS", "1.5"],
    ["ANOMALY_THRESHOLD", "abc"],
    ["ANOMALY_MIN_BASELINE_HOURS", "8"],
  ] as const) {
    const err = t.throws(() => loadConfig({ [variable]: value })) as unknown;
    t.ok(
      err instanceof ConfigError && err.problems.some((p) => p.variable === variable),
      `${variable}=${value}`,
    );
  }
});
