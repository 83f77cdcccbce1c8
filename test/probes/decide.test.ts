import t from "tap";
import { type CheckFacts, changesAnything, decide } from "../../src/probes/decide.js";

/** A healthy connection's facts, changed by `over`. */
const facts = (over: Partial<CheckFacts>): CheckFacts => ({
  available: true,
  badCredentials: false,
  failures: 0,
  successes: 1,
  threshold: 3,
  incidentOpen: false,
  status: "active",
  ...over,
});

t.test("a success keeps or makes the connection active and opens nothing", async (t) => {
  const d = decide(facts({}));
  t.same(d, { event: { type: "check_succeeded" }, status: "active", open: false, resolve: false });
  t.notOk(changesAnything(d, "active"), "nothing beyond the counters");
  t.equal(decide(facts({ status: "inactive" })).status, "active", "first success: inactive -> active");
  t.equal(decide(facts({ status: "error" })).status, "active", "recovery: error -> active");
});

t.test("failures below the threshold change nothing", async (t) => {
  const d = decide(facts({ available: false, failures: 2, successes: 0 }));
  t.equal(d.status, "active");
  t.notOk(d.open);
  t.notOk(changesAnything(d, "active"));
});

t.test("a run reaching the threshold: error and one incident", async (t) => {
  const d = decide(facts({ available: false, failures: 3, successes: 0 }));
  t.same(d.event, { type: "check_failed", badCredentials: false, failures: 3, threshold: 3 });
  t.equal(d.status, "error");
  t.ok(d.open, "opens an availability incident");
  const again = decide(
    facts({ available: false, failures: 4, successes: 0, status: "error", incidentOpen: true }),
  );
  t.notOk(again.open, "never a second one while one is open");
  t.notOk(changesAnything(again, "error"));
  t.ok(
    decide(facts({ available: false, failures: 1, successes: 0, threshold: 1 })).open,
    "a connection's own threshold",
  );
});

t.test("bad credentials: error at once, the incident only after a run", async (t) => {
  const d = decide(facts({ available: false, badCredentials: true, failures: 1, successes: 0 }));
  t.equal(d.status, "error");
  t.notOk(d.open);
});

t.test("two consecutive successes resolve the open incident", async (t) => {
  const one = decide(facts({ successes: 1, status: "error", incidentOpen: true }));
  t.equal(one.status, "active", "the status recovers with the first success");
  t.notOk(one.resolve, "one success does not resolve");
  t.ok(decide(facts({ successes: 2, incidentOpen: true })).resolve);
  t.notOk(decide(facts({ successes: 5 })).resolve, "nothing to resolve");
});
