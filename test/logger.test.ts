import { Writable } from "node:stream";
import t from "tap";
import { createLogger, LazyChildLogger } from "../src/lib/logger.js";
import { testApp } from "./helpers/app.js";

/** A writable that collects the JSON log lines written to it. */
function capture() {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      for (const l of chunk.toString().split("\n")) if (l) lines.push(JSON.parse(l));
      done();
    },
  });
  return { sink, lines };
}

t.test("a request's lazy logger logs enabled levels with its bindings, and nothing else", async (t) => {
  const { sink, lines } = capture();
  const log = createLogger("warn", sink);
  const child = new LazyChildLogger(log, { reqId: "req-1" }, {});
  child.info("not at warn");
  child.debug({ a: 1 }, "nor this");
  t.equal(lines.length, 0, "levels below warn write nothing");
  t.notOk(child.isLevelEnabled("info"));
  t.ok(child.isLevelEnabled("error"));
  child.warn({ field: "x", password: "hunter2" }, "careful");
  child.error(new Error("boom"));
  t.equal(lines.length, 2);
  t.match(lines[0], { level: 40, reqId: "req-1", msg: "careful", field: "x", password: "[redacted]" });
  t.match(lines[1], { level: 50, reqId: "req-1", err: { message: "boom" } });
  child.child({ job: "j" }).warn("nested");
  t.match(lines[2], { reqId: "req-1", job: "j", msg: "nested" });

  const quiet = new LazyChildLogger(log, { reqId: "req-2" }, { level: "error" });
  t.equal(quiet.level, "error", "a route's own level applies");
  quiet.warn("below the route's level");
  t.equal(lines.length, 3);
  quiet.level = "debug";
  quiet.debug("now enabled");
  t.match(lines[3], { reqId: "req-2", msg: "now enabled" });
});

t.test("Fastify's request logs still carry the request id", async (t) => {
  const { sink, lines } = capture();
  const { app } = await testApp(t, { env: { LOG_LEVEL: "info" }, logTo: sink });
  const res = await app.inject({ method: "GET", url: "/v1/nope", headers: { "x-request-id": "trace-42" } });
  t.equal(res.statusCode, 404);
  const mine = lines.filter((l) => l.reqId === "trace-42");
  t.ok(
    mine.some((l) => l.msg === "incoming request"),
    "incoming request logged with the id",
  );
  t.ok(
    mine.some((l) => l.msg === "request completed"),
    "completion logged with the id",
  );
});

t.test("an invitation link's token never reaches the log, also inside return_to", async (t) => {
  const { logUrl } = await import("../src/lib/logger.js");
  t.equal(logUrl("/invitations/abcDEF_123-x?y=1"), "/invitations/[redacted]?y=1");
  t.equal(
    logUrl("/signin?return_to=%2Finvitations%2FabcDEF&z=2"),
    "/signin?return_to=%2Finvitations%2F[redacted]&z=2",
  );
  t.equal(logUrl("/v1/connections?limit=5"), "/v1/connections?limit=5", "other URLs unchanged");
});
