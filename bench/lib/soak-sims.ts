/**
 * The monitored platforms of `vigil bench soak`, in one process of their own:
 *   node soak-sims.js '<json options>'
 * Starts `workflowA` workflow_a simulators (one per simulated host) and one workflow_b simulator
 * (no organization rate limit: in a real fleet each connection is its own Make organization),
 * prints one JSON line `{workflowA: [url…], workflowB: url}` when they listen, and while it runs
 * adds a finished run to every simulator every `runEveryMs` (one in ten an error), so the probes'
 * execution sync keeps writing. Stops on SIGTERM/SIGINT.
 */
import { startWorkflowA } from "../../src/sim/workflow-a.js";
import { startWorkflowB } from "../../src/sim/workflow-b.js";

interface Options {
  workflowA: number;
  latencyMs: number;
  runEveryMs: number;
  apiKey: string;
  apiToken: string;
}

const o = JSON.parse(process.argv[2] as string) as Options;
const a = await Promise.all(
  Array.from({ length: o.workflowA }, () => startWorkflowA({ latencyMs: o.latencyMs, apiKey: o.apiKey })),
);
const b = await startWorkflowB({ latencyMs: o.latencyMs, apiToken: o.apiToken, rateLimitPerMinute: 0 });

/** The simulators keep every run; at most this many per simulator, oldest dropped, so they stay small. */
const KEEP_RUNS = 500;
let n = 0;
const timer = setInterval(() => {
  n++;
  const failed = n % 10 === 0;
  for (const sim of a) {
    sim.add(1, failed ? "error" : "success", `wf-${n % 3}`);
    if (sim.executions.length > KEEP_RUNS) sim.executions.splice(0, sim.executions.length - KEEP_RUNS);
  }
  b.addLogs(n % 2 ? 101 : 102, 1, failed ? 3 : 1);
}, o.runEveryMs);

process.stdout.write(`${JSON.stringify({ workflowA: a.map((s) => s.url), workflowB: b.url })}\n`);

await new Promise<void>((resolve) => {
  process.once("SIGTERM", resolve);
  process.once("SIGINT", resolve);
});
clearInterval(timer);
await Promise.all([...a.map((s) => s.close()), b.close()]);
process.exit(0);
