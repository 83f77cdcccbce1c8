import t from "tap";
import {
  freshDatabaseUrl,
  requireBackend,
  TEST_QUESTDB_PG_URL,
  TEST_QUESTDB_URL,
} from "../helpers/backends.js";
import { serveOnFreePort, runAdmin } from "../helpers/process.js";

/**
 * Heartbeats and usage batches flow while the server is killed with SIGKILL and restarted:
 * every acknowledged heartbeat and entry must be there exactly once afterwards, and resending
 * every heartbeat (acknowledged or not) must not count any of them twice.
 */
t.test("SIGKILL mid-ingest loses nothing acknowledged and counts nothing twice", async (t) => {
  if (!(await requireBackend(t, "postgres"))) return;
  const withQuestdb = await requireBackend(t, "questdb");
  if (!withQuestdb) return;
  const env: Record<string, string> = {
    DATABASE_URL: await freshDatabaseUrl(t),
    QUESTDB_URL: TEST_QUESTDB_URL as string,
    QUESTDB_PG_URL: TEST_QUESTDB_PG_URL as string,
    VIGIL_SECRET: "crash-test-secret-crash-test-secret-0001",
    LOG_LEVEL: "warn",
  };
  const admin = (...args: string[]) => runAdmin(t, env, ...args);
  const user = await admin("create-user", "--email", "crash@x.example", "--plan", "enterprise");
  const { key } = await admin("create-key", "--user", user.id as string);
  const auth = { authorization: `Bearer ${key}`, "content-type": "application/json" };

  let server = await serveOnFreePort(t, { ...env, LOG_LEVEL: "info" });
  await server.waitFor(/series store ready/);
  const post = (url: string, headers: Record<string, string>, body: unknown) =>
    fetch(url, { method: "POST", headers, body: JSON.stringify(body) });

  const gateways: { id: string; key: string }[] = [];
  for (let g = 0; g < 3; g++) {
    const r = await post(`${server.url}/v1/connections`, auth, {
      service_type: "gateway",
      service_name: `gw${g}`,
    });
    const b = (await r.json()) as { connection: { id: string }; ingest_api_key: string };
    gateways.push({ id: b.connection.id, key: b.ingest_api_key });
  }
  const wf = (await (
    await post(`${server.url}/v1/connections`, auth, {
      service_type: "workflow_a",
      service_name: "wf",
      base_url: "http://127.0.0.1:1",
      api_key: "k",
    })
  ).json()) as { connection: { id: string } };
  const wfId = wf.connection.id;

  const base = Date.now() - 6 * 3_600_000;
  const period = (i: number) => ({
    inputTokens: 100,
    outputTokens: 10,
    requestCount: 1,
    estimatedCostUsd: 0.001,
    startedAt: new Date(base + i * 1000).toISOString(),
    endedAt: new Date(base + (i + 1) * 1000).toISOString(),
  });
  const hb = (i: number) => ({
    type: "heartbeat",
    gateway: { status: "healthy", latencyMs: 3, version: "1" },
    tokens: { period: period(i) },
  });

  const attempted = new Map<string, Set<number>>(gateways.map((g) => [g.id, new Set()]));
  const ackedHeartbeats = new Map<string, string>(); // `${gateway}/${i}` -> heartbeat_id
  const ackedEntries = new Set<string>();
  let stop = false;
  const url = server.url;
  const loops = [
    ...gateways.map(async (g) => {
      for (let i = 0; !stop && i < 100_000; i++) {
        attempted.get(g.id)?.add(i);
        try {
          const r = await post(
            `${url}/v1/gateway/ingest`,
            { authorization: `Bearer ${g.key}`, "content-type": "application/json" },
            hb(i),
          );
          if (r.status === 201)
            ackedHeartbeats.set(`${g.id}/${i}`, ((await r.json()) as { heartbeat_id: string }).heartbeat_id);
        } catch {
          return; // the server is gone
        }
      }
    }),
    ...[0, 1].map(async (loop) => {
      for (let i = 0; !stop && i < 100_000; i++) {
        const batch = Array.from({ length: 10 }, (_, j) => ({
          connection_id: wfId,
          entity: `m${loop}`,
          usage_amount: 1,
          metadata: { seq: `${loop}-${i}-${j}` },
        }));
        try {
          const r = await post(`${url}/v1/usage`, auth, batch);
          if (r.status === 201)
            for (const e of ((await r.json()) as { usage: { id: string }[] }).usage) ackedEntries.add(e.id);
        } catch {
          return;
        }
      }
    }),
  ];
  await new Promise((r) => setTimeout(r, 2_000));
  server.proc.kill("SIGKILL");
  stop = true;
  await Promise.all(loops);
  t.ok(ackedHeartbeats.size > 20, `${ackedHeartbeats.size} heartbeats acknowledged before the kill`);
  t.ok(ackedEntries.size > 50, `${ackedEntries.size} usage entries acknowledged before the kill`);

  server = await serveOnFreePort(t, { ...env, LOG_LEVEL: "info" });
  await server.waitFor(/series store ready/);
  // Resend every heartbeat that was attempted, acknowledged or not: the daemon's retry after an outage.
  for (const g of gateways) {
    for (const i of attempted.get(g.id) ?? []) {
      const r = await post(
        `${server.url}/v1/gateway/ingest`,
        { authorization: `Bearer ${g.key}`, "content-type": "application/json" },
        hb(i),
      );
      t.equal(r.status, 201);
      const before = ackedHeartbeats.get(`${g.id}/${i}`);
      if (before)
        t.equal(
          ((await r.json()) as { heartbeat_id: string }).heartbeat_id,
          before,
          "same heartbeat_id after the restart",
        );
      else await r.body?.cancel();
    }
  }

  // Read back through the API, as a user would; QuestDB applies its WAL asynchronously, so poll.
  const readEntries = async () => {
    const ids: string[] = [];
    for (let offset = 0; ; offset += 100) {
      const r = await fetch(`${server.url}/v1/usage?connection_id=${wfId}&limit=100&offset=${offset}`, {
        headers: auth,
      });
      const b = (await r.json()) as { usage_data: { id: string }[]; pagination: { has_more: boolean } };
      ids.push(...b.usage_data.map((e) => e.id));
      if (!b.pagination.has_more) return ids;
    }
  };
  const totals = async (id: string) => {
    const r = await fetch(
      `${server.url}/v1/usage?connection_id=${id}&start_date=${new Date(base - 60_000).toISOString()}`,
      { method: "PUT", headers: { authorization: auth.authorization } },
    );
    return (await r.json()) as { gateway: { heartbeats: number; input_tokens: number } | null };
  };
  const deadline = Date.now() + 20_000;
  let entries: string[];
  let hbTotals: { id: string; heartbeats: number; input: number; expected: number }[];
  for (;;) {
    entries = await readEntries();
    hbTotals = await Promise.all(
      gateways.map(async (g) => {
        const b = await totals(g.id);
        return {
          id: g.id,
          heartbeats: b.gateway?.heartbeats ?? 0,
          input: b.gateway?.input_tokens ?? 0,
          expected: attempted.get(g.id)?.size ?? 0,
        };
      }),
    );
    const settled =
      hbTotals.every((h) => h.heartbeats === h.expected) &&
      [...ackedEntries].every((id) => entries.includes(id));
    if (settled || Date.now() > deadline) break;
    await new Promise((r) => setTimeout(r, 250));
  }
  const missing = [...ackedEntries].filter((id) => !entries.includes(id));
  t.same(missing, [], "every acknowledged usage entry is present");
  t.equal(new Set(entries).size, entries.length, "no usage entry is present twice");
  for (const h of hbTotals) {
    t.equal(h.heartbeats, h.expected, `gateway ${h.id}: one heartbeat per period, however often it was sent`);
    t.equal(h.input, h.expected * 100, "token totals are not double-counted");
  }
  server.proc.kill("SIGTERM");
  await server.exited();
});
