import { startWorkflowA } from "../../src/sim/workflow-a.js";

/**
 * What the workflow_a contract suite needs from a platform: make runs of each kind happen and
 * let them end. Two drivers: `vigil sim workflow_a` (its control API), and a real n8n reached at
 * N8N_URL with the public API key N8N_API_KEY, where runs are made by webhooks of workflows the
 * driver creates and activates through the public API (docs/operations.md: "Against a real n8n").
 */
export interface N8nDriver {
  readonly name: string;
  readonly url: string;
  readonly apiKey: string;
  /** Starts a run that succeeds quickly. */
  quick(): Promise<void>;
  /** Starts a run that fails in a node called "Throw Error" with `message`. */
  failing(message: string): Promise<void>;
  /** Starts a run that stays running for a few seconds; `end()` waits for (or makes) its end. */
  long(): Promise<{ end(): Promise<void> }>;
  /** Starts a run that waits for a call; `resume()` resumes it and waits until it ended. */
  waiting(): Promise<{ resume(): Promise<void> }>;
  /** The name of the workflow whose runs `failing` makes. */
  readonly failingWorkflowName: string;
  close(): Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function simDriver(): Promise<N8nDriver> {
  const sim = await startWorkflowA({ apiKey: "contract-key" });
  const post = (path: string, body: unknown, method = "POST") =>
    fetch(`${sim.url}/__sim/${path}`, {
      method,
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    }).then((r) => r.json() as Promise<{ lastId?: string }>);
  await post("workflows/wf-fail", { name: "contract-fail" }, "PUT");
  return {
    name: "simulator",
    url: sim.url,
    apiKey: "contract-key",
    failingWorkflowName: "contract-fail",
    quick: async () => void (await post("executions", { status: "success", workflowId: "wf-ok" })),
    failing: async (message) =>
      void (await post("executions", {
        status: "error",
        workflowId: "wf-fail",
        error: message,
        node: "Throw Error",
      })),
    long: async () => {
      const { lastId } = await post("executions", { status: "running", workflowId: "wf-long" });
      return { end: async () => void (await post(`executions/${lastId}`, { status: "success" }, "PATCH")) };
    },
    waiting: async () => {
      const { lastId } = await post("executions", { status: "waiting", workflowId: "wf-wait" });
      return {
        resume: async () => {
          await sleep(10); // a resume is later than the first start
          await post(`executions/${lastId}`, { status: "running" }, "PATCH");
          await post(`executions/${lastId}`, { status: "success" }, "PATCH");
        },
      };
    },
    close: () => sim.close(),
  };
}

/** A real n8n: the driver's workflows are created once per run of the suite, then archived. */
export async function realDriver(url: string, apiKey: string): Promise<N8nDriver> {
  const base = url.replace(/\/+$/, "");
  const tag = `vigil-contract-${Date.now().toString(36)}`;
  const api = async (method: string, path: string, body?: unknown) => {
    const r = await fetch(`${base}/api/v1${path}`, {
      method,
      headers: { "X-N8N-API-KEY": apiKey, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await r.text();
    if (!r.ok) throw new Error(`n8n ${method} ${path}: HTTP ${r.status} ${text.slice(0, 300)}`);
    return JSON.parse(text) as Record<string, unknown>;
  };
  const webhook = (p: string) => ({
    id: `${p}-hook`,
    name: "Webhook",
    type: "n8n-nodes-base.webhook",
    typeVersion: 2,
    position: [0, 0],
    webhookId: crypto.randomUUID(),
    parameters: { httpMethod: "POST", path: `${tag}-${p}`, responseMode: "onReceived", options: {} },
  });
  const node = (name: string, type: string, typeVersion: number, parameters: unknown, x: number) => ({
    id: `${name.replace(/\W/g, "-").toLowerCase()}-id`,
    name,
    type,
    typeVersion,
    position: [x, 0],
    parameters,
    ...(type === "n8n-nodes-base.wait" ? { webhookId: crypto.randomUUID() } : {}),
  });
  const chain = (...names: string[]) =>
    Object.fromEntries(
      names.slice(0, -1).map((a, i) => [a, { main: [[{ node: names[i + 1], type: "main", index: 0 }]] }]),
    );
  const created: string[] = [];
  const workflow = async (key: string, nodes: unknown[], names: string[]) => {
    const wf = await api("POST", "/workflows", {
      name: `${tag}-${key}`,
      nodes,
      connections: chain(...names),
      settings: { executionOrder: "v1", saveDataSuccessExecution: "all", saveDataErrorExecution: "all" },
    });
    const id = String(wf.id);
    created.push(id);
    await api("POST", `/workflows/${id}/activate`);
    return id;
  };
  const code = (js: string) => node("Throw Error", "n8n-nodes-base.code", 2, { jsCode: js }, 220);
  await workflow("ok", [webhook("ok"), node("Done", "n8n-nodes-base.noOp", 1, {}, 220)], ["Webhook", "Done"]);
  await workflow(
    "fail",
    [webhook("fail"), code("throw new Error($json.body.message);")],
    ["Webhook", "Throw Error"],
  );
  const longWf = await workflow(
    "long",
    [
      webhook("long"),
      node("Wait", "n8n-nodes-base.wait", 1.1, { resume: "timeInterval", amount: 4, unit: "seconds" }, 220),
    ],
    ["Webhook", "Wait"],
  );
  const waitWf = await workflow(
    "wait",
    [
      webhook("wait"),
      node(
        "Wait",
        "n8n-nodes-base.wait",
        1.1,
        { resume: "webhook", httpMethod: "POST", responseMode: "onReceived", options: {} },
        220,
      ),
    ],
    ["Webhook", "Wait"],
  );
  const hook = async (p: string, body: unknown = {}) => {
    const r = await fetch(`${base}/webhook/${tag}-${p}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    if (!r.ok) throw new Error(`n8n webhook ${p}: HTTP ${r.status}`);
    await r.arrayBuffer();
  };
  /** The newest run of a workflow in a given state, found by id (the list hides open runs). */
  const findRun = async (workflowId: string, status: string): Promise<string> => {
    for (let attempt = 0; attempt < 50; attempt++) {
      const listed = await api("GET", "/executions?limit=1");
      let id = Number((listed.data as { id: string }[])[0]?.id ?? 0);
      for (let misses = 0; misses < 20; id++) {
        const r = await fetch(`${base}/api/v1/executions/${id + 1}`, {
          headers: { "X-N8N-API-KEY": apiKey },
        });
        if (r.status === 404) {
          misses++;
          continue;
        }
        const e = (await r.json()) as { workflowId?: string; status?: string };
        if (e.workflowId === workflowId && e.status === status) return String(id + 1);
      }
      await sleep(100);
    }
    throw new Error(`no ${status} run of workflow ${workflowId} appeared`);
  };
  const until = async (id: string, done: (status: string) => boolean) => {
    for (let i = 0; i < 200; i++) {
      const e = (await api("GET", `/executions/${id}`)) as { status?: string };
      if (done(String(e.status))) return;
      await sleep(100);
    }
    throw new Error(`run ${id} did not end`);
  };
  return {
    name: `n8n at ${base}`,
    url: base,
    apiKey,
    failingWorkflowName: `${tag}-fail`,
    quick: () => hook("ok"),
    failing: (message) => hook("fail", { message }),
    long: async () => {
      await hook("long");
      const id = await findRun(longWf, "running");
      return { end: () => until(id, (s) => s === "success") };
    },
    waiting: async () => {
      await hook("wait");
      const id = await findRun(waitWf, "waiting");
      return {
        resume: async () => {
          await sleep(1100); // a resume is later than the first start
          const r = await fetch(`${base}/webhook-waiting/${id}`, { method: "POST" });
          await r.arrayBuffer();
          await until(id, (s) => s === "success");
        },
      };
    },
    close: async () => {
      for (const id of created) {
        await api("POST", `/workflows/${id}/deactivate`).catch(() => {});
        await api("DELETE", `/workflows/${id}`).catch(() => {});
      }
    },
  };
}

export function platformDriver(): Promise<N8nDriver> {
  const url = process.env.N8N_URL;
  const key = process.env.N8N_API_KEY;
  return url && key ? realDriver(url, key) : simDriver();
}
