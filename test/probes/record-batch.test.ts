import t, { type Test } from "tap";
import { Batcher } from "../../src/probes/batch.js";
import { claim } from "../../src/probes/claim.js";
import { recordChecks } from "../../src/probes/repository.js";
import { ProbeWorker } from "../../src/probes/worker.js";
import { startWorkflowA } from "../../src/sim/workflow-a.js";
import { type TestApp, testApp } from "../helpers/app.js";
import { call, seedTenants } from "../helpers/tenants.js";

/**
 * A probe worker records the checks that finish together in one statement (batch.ts,
 * repository `recordChecks`), and reads the workflow names still fresh with its claim. What a
 * user sees must be what one statement per check gave: every check counted once, on its own
 * connection, only by the lease holder.
 */

const relationals = ["pglite", ...(process.env.TEST_DATABASE_URL ? (["postgres"] as const) : [])] as const;

async function workflowA(ta: TestApp, key: string, url: string, name: string): Promise<string> {
  const r = await call(ta.app, key, "POST", "/v1/connections", {
    service_type: "workflow_a",
    service_name: name,
    base_url: url,
    api_key: "sim-api-key",
  });
  return r.json().connection.id as string;
}

for (const relational of relationals)
  t.test(`${relational}: many checks at once, each recorded on its own connection`, async (t: Test) => {
    const ta = await testApp(t, { relational });
    const w = await seedTenants(ta);
    const up = await startWorkflowA();
    const down = await startWorkflowA();
    t.teardown(() => Promise.all([up.close(), down.close()]));
    await fetch(`${down.url}/__sim/state`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ fault: "down" }),
    });
    const ups: string[] = [];
    const downs: string[] = [];
    for (let i = 0; i < 12; i++) ups.push(await workflowA(ta, w.keys.alicePersonal, up.url, `up ${i}`));
    for (let i = 0; i < 6; i++) downs.push(await workflowA(ta, w.keys.bobPersonal, down.url, `down ${i}`));
    const db = ta.ctx.stores.db;
    // the seeded connections point nowhere; only ours are due
    await db.query(
      "UPDATE connections SET next_check_at = now() + interval '1 hour' WHERE NOT (id = ANY($1::text[]))",
      [[...ups, ...downs]],
    );
    const worker = new ProbeWorker(ta.ctx, { timeoutMs: 2000 });
    t.teardown(() => worker.stop());

    const rows = async () =>
      (
        await db.query<{
          id: string;
          failures: number;
          successes: number;
          owner: string | null;
          checked: boolean;
          synced: boolean;
          later: boolean;
        }>(
          `SELECT id, consecutive_failures AS failures, consecutive_successes AS successes, lease_owner AS owner,
                  last_check_at IS NOT NULL AS checked, last_sync_at IS NOT NULL AS synced,
                  next_check_at > now() AS later
             FROM connections WHERE id = ANY($1::text[])`,
          [[...ups, ...downs]],
        )
      ).rows;

    for (let round = 1; round <= 3; round++) {
      await db.query("UPDATE connections SET next_check_at = now() WHERE id = ANY($1::text[])", [
        [...ups, ...downs],
      ]);
      t.equal(await worker.tick(), 18, `round ${round}: all 18 claimed in one tick`);
      await worker.idle();
      const byId = new Map((await rows()).map((r) => [r.id, r]));
      const wrong: string[] = [];
      for (const id of ups) {
        const r = byId.get(id);
        if (
          !r ||
          r.failures !== 0 ||
          r.successes !== round ||
          r.owner !== null ||
          !r.checked ||
          !r.later ||
          !r.synced
        )
          wrong.push(`up ${id}: ${JSON.stringify(r)}`);
      }
      for (const id of downs) {
        const r = byId.get(id);
        if (
          !r ||
          r.failures !== round ||
          r.successes !== 0 ||
          r.owner !== null ||
          !r.checked ||
          !r.later ||
          r.synced
        )
          wrong.push(`down ${id}: ${JSON.stringify(r)}`);
      }
      t.same(
        wrong,
        [],
        `round ${round}: every connection counted once, its lease ended, its next slot later`,
      );
    }
    // three failures in a row (the default threshold): one incident per failing connection, none for the others
    const incidents = await db.query<{ connection_id: string }>(
      "SELECT connection_id FROM incidents WHERE kind = 'availability' AND status <> 'resolved'",
    );
    t.same(
      incidents.rows.map((r) => r.connection_id).sort(),
      [...downs].sort(),
      "an incident for each failing one",
    );
  });

for (const relational of relationals)
  t.test(`${relational}: only the lease holder's results count, in the order asked`, async (t: Test) => {
    const ta = await testApp(t, { relational });
    const w = await seedTenants(ta);
    const db = ta.ctx.stores.db;
    const [a, b, c] = [w.conns.PA, w.conns.PB, w.conns.PC];
    await db.query(
      "UPDATE connections SET lease_owner = 'me', lease_until = now() + interval '30 seconds' WHERE id = ANY($1::text[])",
      [[a, b]],
    );
    // c's lease was taken over by another worker
    await db.query(
      "UPDATE connections SET lease_owner = 'other', lease_until = now() + interval '30 seconds' WHERE id = $1",
      [c],
    );
    const at = new Date();
    const next = new Date(at.getTime() + 60_000);
    const out = await recordChecks(db, "me", [
      { id: c, available: true, at, nextCheckAt: next, sync: null },
      { id: b, available: false, at, nextCheckAt: next, sync: null },
      { id: "no-such-connection", available: true, at, nextCheckAt: next, sync: null },
      {
        id: a,
        available: true,
        at,
        nextCheckAt: next,
        sync: { highWater: "42", note: 'quotes " and \\ back' } as never,
      },
    ]);
    t.equal(out.length, 4);
    t.equal(out[0], null, "a lost lease: not recorded");
    t.match(out[1], { failures: 1, successes: 0, open: false });
    t.equal(out[2], null, "a deleted connection: not recorded");
    t.match(out[3], { failures: 0, successes: 1, open: false });
    const state = await db.query<{
      id: string;
      owner: string | null;
      sync: Record<string, unknown>;
      synced: boolean;
    }>(
      "SELECT id, lease_owner AS owner, sync_state AS sync, last_sync_at IS NOT NULL AS synced FROM connections WHERE id = ANY($1::text[])",
      [[a, b, c]],
    );
    const byId = Object.fromEntries(state.rows.map((r) => [r.id, r]));
    t.equal(byId[c]?.owner, "other", "the other worker keeps its lease");
    t.equal(byId[a]?.owner, null);
    t.equal(byId[b]?.owner, null);
    t.same(byId[a]?.sync, { highWater: "42", note: 'quotes " and \\ back' }, "sync state stored as given");
    t.equal(byId[a]?.synced, true);
    t.equal(byId[b]?.synced, false, "no sync state: last_sync_at stays");
  });

for (const relational of relationals)
  t.test(`${relational}: the claim reads which workflow names are still fresh`, async (t: Test) => {
    const ta = await testApp(t, { relational });
    const w = await seedTenants(ta);
    const db = ta.ctx.stores.db;
    const now = ta.ctx.now();
    await db.query(
      `INSERT INTO workflow_names (connection_id, workflow_id, name, updated_at)
       VALUES ($1, 'wf-new', 'fresh', $2), ($1, 'wf-old', 'stale', $3)`,
      [w.conns.PA, now.toISOString(), new Date(now.getTime() - 7 * 3_600_000).toISOString()],
    );
    await db.query(
      "UPDATE connections SET next_check_at = now() - interval '1 second' WHERE service_type <> 'gateway'",
    );
    const claimed = await claim(ta.ctx, { workerId: "w", max: 10, leaseMs: 30_000, aheadMs: 0 });
    const by = Object.fromEntries(claimed.map((c) => [c.id, c.fresh_workflow_ids]));
    t.same(by[w.conns.PA], ["wf-new"], "names read within 6 h only");
    t.same(by[w.conns.PB], [], "none yet");
    t.equal(by[w.conns.OA], null, "not a workflow_a connection");
  });

t.test("a batch that fails is retried item by item, so one bad item fails only itself", async (t: Test) => {
  const batches: number[][] = [];
  const b = new Batcher<number, number>({
    run: async (items) => {
      batches.push(items);
      await new Promise((r) => setTimeout(r, 5));
      if (items.includes(13)) throw new Error("thirteen");
      return items.map((i) => i * 2);
    },
    key: (i) => String(i),
    maxInFlight: 1,
    maxItems: 100,
  });
  const results = await Promise.allSettled([1, 2, 13, 4, 4].map((i) => b.submit(i)));
  t.same(
    results.map((r) => (r.status === "fulfilled" ? r.value : (r.reason as Error).message)),
    [2, 4, "thirteen", 8, 8],
  );
  t.ok(
    batches.every((x) => new Set(x).size === x.length),
    "one key appears at most once in a batch",
  );
  t.ok(
    batches.some((x) => x.length > 1),
    "items submitted together went out together",
  );
});

t.test("with a linger, items arriving one by one share a statement", async (t: Test) => {
  const trickle = async (lingerMs: number) => {
    const batches: number[][] = [];
    const b = new Batcher<number, number>({
      run: async (items) => {
        batches.push(items);
        return items.map((i) => i + 1);
      },
      key: (i) => String(i),
      maxInFlight: 2,
      maxItems: 4,
      lingerMs,
    });
    const pending: Promise<number>[] = [];
    // ten items, one every 2 ms: a statement in flight is answered before the next item comes
    for (let i = 0; i < 10; i++) {
      pending.push(b.submit(i));
      await new Promise((r) => setTimeout(r, 2));
    }
    return { out: await Promise.all(pending), batches };
  };
  const eager = await trickle(0);
  t.same(eager.out, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
  t.equal(eager.batches.length, 10, "without a linger each item goes alone");
  const lingering = await trickle(30);
  t.same(lingering.out, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], "every item answered, in order");
  t.ok(
    lingering.batches.length <= 4 && lingering.batches.every((x) => x.length <= 4),
    `a few full-ish statements (${lingering.batches.map((x) => x.length).join(", ")})`,
  );
  t.equal(lingering.batches.flat().length, 10, "each item once");
});

t.test("the long linger applies only while items come fast; a trickle goes out at once", async (t: Test) => {
  const sent: { at: number; n: number }[] = [];
  const b = new Batcher<number, number>({
    run: async (items) => {
      sent.push({ at: performance.now(), n: items.length });
      return items;
    },
    key: (i) => String(i),
    maxInFlight: 2,
    maxItems: 1_000,
    lingerMs: 2_000,
    // well below the ~100 a second sent, so a loaded host's slower timers still count as fast
    lingerMinRate: 20,
    slowLingerMs: 0,
  });
  // a trickle: one item (no rate yet, or far below 20 a second)
  let started = performance.now();
  await b.submit(1);
  t.ok(performance.now() - started < 500, "a lone item is not held for the long linger");
  // a stream: 100 items a second for 1.5 s (the rate is known after its first second: those
  // items go out as they come, the later ones wait to share a statement), then one more
  for (let i = 0; i < 150; i++) {
    void b.submit(100 + i);
    await new Promise((r) => setTimeout(r, 10));
  }
  started = performance.now();
  await b.submit(1_000);
  const waited = performance.now() - started;
  t.ok(waited >= 500, `at ~100 items a second a batch lingers (waited ${Math.round(waited)} ms)`);
  t.ok(
    sent.some((s) => s.n > 20),
    `fast items share statements (${sent.map((s) => s.n).join(", ")})`,
  );
});
