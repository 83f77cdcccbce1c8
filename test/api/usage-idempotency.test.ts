import type { FastifyInstance } from "fastify";
import t from "tap";
import { type BackendName, requireBackend } from "../helpers/backends.js";
import { testApp } from "../helpers/app.js";
import { seedTenants } from "../helpers/tenants.js";
import { expire } from "../../src/retention/job.js";

/**
 * POST /v1/usage with an Idempotency-Key: a client that resends a batch (its answer was lost)
 * stores it once and gets the first answer back; a key reused for another batch is a 409; a bad
 * key a 400; keys are per API key; the retention job forgets them after 24 hours.
 */
function post(app: FastifyInstance, key: string, body: unknown, idem?: string | string[]) {
  return app.inject({
    method: "POST",
    url: "/v1/usage",
    headers: { authorization: `Bearer ${key}`, ...(idem === undefined ? {} : { "idempotency-key": idem }) },
    payload: body as Record<string, unknown>,
  });
}

for (const [relational, series] of [
  ["pglite", "pglite"],
  ["postgres", "questdb"],
] as ["pglite" | "postgres", BackendName][]) {
  t.test(`Idempotency-Key on POST /v1/usage (${relational} + ${series})`, async (t) => {
    if (!(await requireBackend(t, relational)) || !(await requireBackend(t, series))) return;
    const ta = await testApp(t, { relational, series });
    const { app } = ta;
    const w = await seedTenants(ta);
    const { PA, OA } = w.conns;
    const batch = [
      { connection_id: PA, entity: "gpt-4o", usage_amount: 100, cost_cents: 2 },
      { connection_id: PA, entity: "gpt-4o-mini", usage_amount: 50, cost_cents: 0.5 },
    ];
    const totals = async () => {
      await ta.ctx.stores.series.waitVisible();
      const r = await app.inject({
        method: "PUT",
        url: `/v1/usage?connection_id=${PA}`,
        headers: { authorization: `Bearer ${w.keys.alicePersonal}` },
      });
      t.equal(r.statusCode, 200, r.body);
      return r.json() as { totals: { entries: number; cost_cents: number } };
    };

    const first = await post(app, w.keys.alicePersonal, batch, "batch-0001");
    t.equal(first.statusCode, 201, first.body);
    const again = await post(app, w.keys.alicePersonal, batch, "batch-0001");
    t.equal(again.statusCode, 201, "a resend is answered as the first");
    t.same(again.json().usage, first.json().usage, "with the same entries: ids and created_at");
    const after = await totals();
    t.equal(after.totals.entries, 2, "the batch is counted once");
    t.equal(after.totals.cost_cents, 2.5);

    // the same key with another batch: refused, nothing stored
    const other = await post(app, w.keys.alicePersonal, [batch[0]], "batch-0001");
    t.equal(other.statusCode, 409, other.body);
    t.match(other.json().error?.message ?? other.body, /Idempotency-Key was used with a different batch/);
    // without a key: stored each time, as before
    t.equal((await post(app, w.keys.alicePersonal, batch[0])).statusCode, 201);
    t.equal((await post(app, w.keys.alicePersonal, batch[0])).statusCode, 201);
    t.equal((await totals()).totals.entries, 4, "requests without a key are not deduplicated");

    // keys are per API key: another key's "batch-0001" is its own batch
    const org = await post(app, w.keys.aliceOrgA, [{ ...batch[0], connection_id: OA }], "batch-0001");
    t.equal(org.statusCode, 201, org.body);
    t.not(org.json().usage[0].id, first.json().usage[0].id);

    // bad keys name the header
    for (const bad of ["", "x".repeat(256), "has space", "é"]) {
      const r = await post(app, w.keys.alicePersonal, batch, bad);
      t.equal(r.statusCode, 400, `key ${JSON.stringify(bad.slice(0, 20))}: ${r.body}`);
      t.match(r.body, /idempotency-key/);
    }
    // a forbidden batch claims nothing: the key stays free for the caller's real batch
    const forbidden = await post(app, w.keys.bobOrgB, batch, "batch-0002");
    t.ok([403, 404].includes(forbidden.statusCode), forbidden.body);
    t.equal((await post(app, w.keys.alicePersonal, batch, "batch-0002")).statusCode, 201);

    // the retention job forgets claims older than 24 hours
    const db = ta.ctx.stores.db;
    await db.query("UPDATE usage_idempotency SET recorded_at = recorded_at - interval '25 hours'");
    const removed = await expire(ta.ctx);
    t.equal(removed.usage_idempotency_keys, 3, "three claims expired");
    t.equal((await db.query("SELECT count(*)::int AS n FROM usage_idempotency")).rows[0]?.n, 0);
  });
}
