import t from "tap";
import { judge } from "../../src/anomalies/baselines.js";
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

t.test("minimum data: fewer baseline windows than required never alarm", async (t) => {
  t.equal(judge("response_time", 10_000, [100, 100, 100, 100], 3.5, 5), null);
  t.not(judge("response_time", 10_000, [100, 100, 100, 100, 100], 3.5, 5), null);
});

t.test("the floors of sums scale with the window", async (t) => {
  // $0.05 an hour: $0.0125 over 15 minutes, so a window of cents can still stand out
  t.equal(judge("token_spend", 0.1, [0, 0, 0, 0, 0], 3.5, 5, 15)?.scale, 0.0125);
  t.equal(judge("token_spend", 0.1, [0, 0, 0, 0, 0], 3.5, 5, 15)?.outside, true);
  t.equal(
    judge("response_time", 600, [100, 100, 100, 100, 100], 3.5, 5, 15)?.scale,
    10,
    "latency floors do not scale",
  );
});

t.test("configuration", async (t) => {
  t.same(loadConfig({}).anomalies, {
    intervalSeconds: 60,
    windowMinutes: 15,
    shortWindowMinutes: 5,
    windows: 6,
    threshold: 3.5,
    minBaselineDays: 5,
    catchUpHours: 24,
  });
  t.same(
    loadConfig({
      ANOMALY_INTERVAL_SECONDS: "30",
      ANOMALY_WINDOW_MINUTES: "30",
      ANOMALY_SHORT_WINDOW_MINUTES: "10",
      ANOMALY_WINDOWS: "11",
      ANOMALY_THRESHOLD: "4.5",
      ANOMALY_MIN_BASELINE_DAYS: "7",
      ANOMALY_CATCH_UP_HOURS: "0",
    }).anomalies,
    {
      intervalSeconds: 30,
      windowMinutes: 30,
      shortWindowMinutes: 10,
      windows: 11,
      threshold: 4.5,
      minBaselineDays: 7,
      catchUpHours: 0,
    },
  );
  for (const [env, variable, says] of [
    [{ ANOMALY_INTERVAL_SECONDS: "0" }, "ANOMALY_INTERVAL_SECONDS", "at least"],
    [{ ANOMALY_WINDOWS: "1.5" }, "ANOMALY_WINDOWS", "whole"],
    [{ ANOMALY_THRESHOLD: "abc" }, "ANOMALY_THRESHOLD", "number"],
    [{ ANOMALY_MIN_BASELINE_DAYS: "8" }, "ANOMALY_MIN_BASELINE_DAYS", "at most"],
    [{ ANOMALY_CATCH_UP_HOURS: "25" }, "ANOMALY_CATCH_UP_HOURS", "at most"],
    [{ ANOMALY_WINDOW_MINUTES: "12" }, "ANOMALY_WINDOW_MINUTES", "multiple of 5"],
    [
      { ANOMALY_SHORT_WINDOW_MINUTES: "20" },
      "ANOMALY_SHORT_WINDOW_MINUTES",
      "at most ANOMALY_WINDOW_MINUTES",
    ],
    [{ ANOMALY_WINDOWS: "5" }, "ANOMALY_WINDOWS", "single bad minute"],
    [
      { ANOMALY_SHORT_WINDOW_MINUTES: "10" },
      "ANOMALY_WINDOWS",
      "more than ANOMALY_SHORT_WINDOW_MINUTES (10)",
    ],
    [{ ANOMALY_MIN_BASELINE_HOURS: "5" }, "ANOMALY_MIN_BASELINE_HOURS", "ANOMALY_MIN_BASELINE_DAYS"],
  ] as const) {
    const err = t.throws(() => loadConfig(env)) as unknown;
    t.ok(
      err instanceof ConfigError &&
        err.problems.some((p) => p.variable === variable && p.message.includes(says)) &&
        err.message.includes(variable),
      `${JSON.stringify(env)}: ${variable} ${says}`,
    );
  }
});
