import t from "tap";
import { type ConnectionStatus, nextStatus, type StatusEvent } from "../../src/connections/status.js";

const ALL: ConnectionStatus[] = ["inactive", "active", "error"];

t.test("the spec's connection transitions", async (t) => {
  for (const from of ALL) {
    t.equal(nextStatus(from, { type: "check_succeeded" }), "active", `${from}: a successful check -> active`);
    t.equal(nextStatus(from, { type: "heartbeat_received" }), "active", `${from}: a heartbeat -> active`);
    t.equal(nextStatus(from, { type: "heartbeat_missed" }), "error", `${from}: a missed heartbeat -> error`);
    t.equal(nextStatus(from, { type: "reconfigured" }), "inactive", `${from}: reconfigured -> inactive`);
    const bad: StatusEvent = { type: "check_failed", badCredentials: true, failures: 1, threshold: 3 };
    t.equal(nextStatus(from, bad), "error", `${from}: bad credentials -> error at once`);
    const run: StatusEvent = { type: "check_failed", badCredentials: false, failures: 3, threshold: 3 };
    t.equal(nextStatus(from, run), "error", `${from}: a run of failures -> error`);
    const one: StatusEvent = { type: "check_failed", badCredentials: false, failures: 1, threshold: 3 };
    t.equal(nextStatus(from, one), from, `${from}: a single failure changes nothing`);
  }
});
