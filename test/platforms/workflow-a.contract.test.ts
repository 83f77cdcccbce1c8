import t from "tap";
import { createProbeAgent } from "../../src/probes/http.js";
import type { SyncState } from "../../src/probes/platform.js";
import { runCheck } from "../../src/probes/platforms.js";
import { syncExecutions } from "../../src/probes/sync.js";
import { executions } from "../../src/stores/series/tables.js";
import { testApp } from "../helpers/app.js";
import { seedTenants, call } from "../helpers/tenants.js";
import { platformDriver } from "./n8n-driver.js";

/**
 * The workflow_a adapter contract: one suite, run against `vigil sim workflow_a` in CI and
 * against a real n8n with `N8N_URL=… N8N_API_KEY=… npm run test:platforms` (docs/operations.md: "Against a
 * real n8n"). Assertions compare what Vigil stored with what the platform itself answers by id.
 */

t.test("workflow_a contract", async (t) => {
  const platform = await platformDriver();
  t.teardown(() => platform.close());
  t.comment(`platform: ${platform.name}`);
  const ta = await testApp(t);
  const w = await seedTenants(ta);
  const agent = createProbeAgent();
  t.teardown(() => agent.close());
  const created = await call(ta.app, w.keys.alicePersonal, "POST", "/v1/connections", {
    service_type: "workflow_a",
    service_name: "contract",
    base_url: platform.url,
    api_key: platform.apiKey,
  });
  const id = created.json().connection.id as string;
  let state: SyncState = {};
  const sync = async () => {
    // Several ticks when the platform holds more than one tick's budget (a real instance's history).
    for (let i = 0; i < 50; i++) {
      const out = await syncExecutions(
        ta.ctx,
        agent,
        {
          id,
          serviceType: "workflow_a",
          baseUrl: platform.url,
          apiKey: platform.apiKey,
          apiToken: null,
          region: null,
          teamId: null,
          state,
          lastSyncAt: null,
        },
        10_000,
      );
      state = out.state;
      if (!state.sweep) break;
    }
    await ta.ctx.stores.series.waitVisible();
  };
  const rows = async () =>
    (
      await ta.ctx.stores.series.page(executions, {
        where: [{ column: "connection_id", op: "eq", value: id }],
        limit: 100_000,
      })
    ).rows;
  const platformRun = async (runId: string) => {
    const r = await fetch(`${platform.url}/api/v1/executions/${runId}`, {
      headers: { "X-N8N-API-KEY": platform.apiKey },
    });
    return r.status === 404 ? null : ((await r.json()) as { status: string; workflowId: string });
  };

  await t.test("the check: up with the key, bad_credentials without", async (t) => {
    const target = {
      serviceType: "workflow_a" as const,
      baseUrl: platform.url,
      apiToken: null,
      region: null,
    };
    const ok = await runCheck(
      agent,
      { ...target, apiKey: platform.apiKey },
      { timeoutMs: 10_000, workflowBApiTemplate: "" },
    );
    t.equal(ok.available, true);
    const bad = await runCheck(
      agent,
      { ...target, apiKey: "not-the-key" },
      { timeoutMs: 10_000, workflowBApiTemplate: "" },
    );
    t.equal(bad.reason, "bad_credentials");
  });

  /** Ids of the runs the platform's list shows: ended ones (it hides running and waiting runs). */
  const listed = async () => {
    const r = await fetch(`${platform.url}/api/v1/executions?limit=250`, {
      headers: { "X-N8N-API-KEY": platform.apiKey },
    });
    return ((await r.json()) as { data: { id: string | number }[] }).data.map((e) => String(e.id));
  };
  /** Waits until `n` runs started since `since` have ended (a loaded host runs them slower). */
  const ended = async (since: Set<string>, n: number) => {
    const deadline = Date.now() + 20_000;
    while ((await listed()).filter((x) => !since.has(x)).length < n && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 100));
  };

  await sync(); // whatever the instance already holds
  const before = new Set((await rows()).map((r) => r.execution_id));
  const listedBefore = new Set(await listed());

  await t.test("runs running or waiting during a sync are neither lost nor duplicated", async (t) => {
    const long = await platform.long();
    const waiting = await platform.waiting();
    await platform.quick();
    await platform.failing("contract failure: upstream said 502");
    await platform.quick();
    await ended(listedBefore, 3); // the quick runs and the failing one
    await sync();
    const mid = (await rows()).filter((r) => !before.has(r.execution_id));
    t.same(
      mid.map((r) => r.status).sort(),
      ["error", "running", "success", "success", "waiting"],
      "the running and the waiting run are stored though the list hides them",
    );
    await long.end();
    await waiting.resume();
    await platform.quick();
    await ended(listedBefore, 6); // and the long, the resumed and the last quick run
    await sync();
    const all = await rows();
    t.equal(new Set(all.map((r) => r.execution_id)).size, all.length, "no execution id stored twice");
    // A live instance may run other workflows meanwhile: at least this suite's six runs are new.
    const after = all.filter((r) => !before.has(r.execution_id));
    t.ok(after.length >= 6, `this suite's six runs are stored (${after.length} new)`);
    for (const row of after) {
      const real = await platformRun(row.execution_id);
      t.ok(real, `run ${row.execution_id} exists on the platform`);
      const open = real?.status === "running" || real?.status === "waiting" || real?.status === "new";
      if (!open)
        t.equal(
          row.status,
          real?.status === "canceled" ? "cancelled" : real?.status === "crashed" ? "error" : real?.status,
          `run ${row.execution_id}: the platform's status`,
        );
      t.equal(row.workflow_id, real?.workflowId);
    }
    for (const tracked of state.tracked ?? []) {
      const real = await platformRun(tracked.id);
      t.ok(
        real === null || ["running", "waiting", "new"].includes(real.status) || !tracked.stored,
        `run ${tracked.id} is followed only while it is open`,
      );
    }
  });

  await t.test("a failure carries the platform's message and node; runs carry workflow names", async (t) => {
    const res = await call(
      ta.app,
      w.keys.alicePersonal,
      "GET",
      `/v1/executions?connection_id=${id}&status=error&include_error_details=true&limit=100`,
    );
    const failed = (res.json().data as Record<string, unknown>[]).find((e) =>
      String(e.error).includes("contract failure: upstream said 502"),
    );
    t.ok(failed, "the message n8n recorded");
    t.equal(failed?.error_node, "Throw Error");
    t.equal(failed?.last_node, "Throw Error");
    t.equal(failed?.workflow_name, platform.failingWorkflowName);
  });
});
