import { parseArgs } from "node:util";
import { startGatewaySim } from "./gateway.js";
import { startWorkflowA } from "./workflow-a.js";
import { startWorkflowB } from "./workflow-b.js";

export const SIM_USAGE = `Usage: vigil sim <kind> [options]   (runs until SIGINT/SIGTERM; prints one JSON line when ready)

  workflow_a [--port P] [--api-key K] [--latency-ms N] [--executions N]
  workflow_b [--port P] [--api-token T] [--team-id ID] [--latency-ms N]
  gateway    --url VIGIL_URL --key KEY[,KEY...] [--interval-ms N] [--port P]

Every simulator has a control API at /__sim: POST /__sim/state {"fault": "none|down|hang|garbage|huge|redirect|close|bad_credentials", "latencyMs": N}.`;

export async function simMain(argv: string[]): Promise<number> {
  const [kind, ...rest] = argv;
  const fail = (m: string) => {
    process.stderr.write(`vigil sim: ${m}\n${SIM_USAGE}\n`);
    return 2;
  };
  let values: Record<string, string | undefined>;
  try {
    values = parseArgs({
      args: rest,
      options: Object.fromEntries(
        [
          "port",
          "api-key",
          "api-token",
          "team-id",
          "latency-ms",
          "executions",
          "url",
          "key",
          "interval-ms",
        ].map((k) => [k, { type: "string" as const }]),
      ),
    }).values as Record<string, string | undefined>;
  } catch (err) {
    return fail((err as Error).message);
  }
  const num = (name: string) => {
    const v = values[name];
    if (v === undefined) return undefined;
    const n = Number(v);
    if (!Number.isInteger(n) || n < 0) throw new Error(`--${name} must be a whole number`);
    return n;
  };
  let sim: { url: string; close(): Promise<void> };
  try {
    switch (kind) {
      case "workflow_a":
        sim = await startWorkflowA({
          port: num("port"),
          apiKey: values["api-key"],
          latencyMs: num("latency-ms"),
          executions: num("executions"),
        });
        break;
      case "workflow_b":
        sim = await startWorkflowB({
          port: num("port"),
          apiToken: values["api-token"],
          teamId: values["team-id"],
          latencyMs: num("latency-ms"),
        });
        break;
      case "gateway":
        if (!values.url || !values.key) return fail("gateway needs --url and --key");
        sim = await startGatewaySim({
          vigilUrl: values.url.replace(/\/+$/, ""),
          keys: values.key.split(","),
          intervalMs: num("interval-ms"),
          port: num("port"),
        });
        break;
      default:
        return fail(kind ? `unknown kind "${kind}"` : "name a kind");
    }
  } catch (err) {
    return fail((err as Error).message);
  }
  process.stdout.write(`${JSON.stringify({ kind, url: sim.url, control: `${sim.url}/__sim` })}\n`);
  await new Promise<void>((resolve) => {
    process.once("SIGINT", resolve);
    process.once("SIGTERM", resolve);
  });
  await sim.close();
  return 0;
}
