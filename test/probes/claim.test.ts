import t from "tap";
import { releaseStaleLeases, STALE_LEASE_MS } from "../../src/probes/claim.js";
import { testApp } from "../helpers/app.js";
import { seedTenants } from "../helpers/tenants.js";

t.test("housekeeping clears only leases that ran out long ago", async (t) => {
  const ta = await testApp(t);
  const w = await seedTenants(ta);
  const db = ta.ctx.stores.db;
  const lease = (id: string, msAgo: number) =>
    db.query("UPDATE connections SET lease_owner = 'w', lease_until = $2 WHERE id = $1", [
      id,
      new Date(Date.now() - msAgo).toISOString(),
    ]);
  await lease(w.conns.PA, STALE_LEASE_MS + 60_000); // a worker that died long ago
  await lease(w.conns.PB, 1_000); // just ran out: a slow check may still report
  await lease(w.conns.PC, -30_000); // live
  t.equal(await releaseStaleLeases(ta.ctx), 1);
  const owners = await db.query<{ id: string; owner: string | null }>(
    "SELECT id, lease_owner AS owner FROM connections WHERE id = ANY($1::text[])",
    [[w.conns.PA, w.conns.PB, w.conns.PC]],
  );
  const byId = Object.fromEntries(owners.rows.map((r) => [r.id, r.owner]));
  t.same(byId, { [w.conns.PA]: null, [w.conns.PB]: "w", [w.conns.PC]: "w" });
});
