import t from "tap";
import { hasPermission, READ_PERMISSIONS, systemActor, type UserActor } from "../../src/core/actor.js";
import { keyStore } from "../../src/identity/keys.js";
import { asManager, connectionAccess, visibleConnectionIds } from "../../src/identity/visibility.js";
import { testApp } from "../helpers/app.js";
import { seedTenants } from "../helpers/tenants.js";

/**
 * The actor kinds REST cannot produce yet (a signed-in user, the system) go through the same
 * visibility rule as keys: a user sees exactly what their personal key sees, the system sees
 * everything, and neither needs a rule of its own.
 */
for (const relational of ["pglite", "postgres"] as const) {
  t.test(`one visibility rule for every actor kind (${relational})`, async (t) => {
    const ta = await testApp(t, { relational });
    const w = await seedTenants(ta);
    const db = ta.ctx.stores.db;
    const sorted = async (p: Promise<string[]>) => (await p).sort();
    const keyOf = async (key: string) => {
      const auth = await keyStore(ta.ctx).authenticate(key);
      if (!auth) throw new Error("seeded key does not authenticate");
      return auth.actor;
    };

    for (const name of ["alice", "dave", "carol"] as const) {
      const user: UserActor = {
        type: "user",
        userId: w.users[name].id,
        via: "oauth",
        permissions: new Set(READ_PERMISSIONS),
      };
      const personal = await keyOf(w.keys[`${name}Personal`]);
      t.same(
        await sorted(visibleConnectionIds(db, user)),
        await sorted(visibleConnectionIds(db, personal)),
        `${name} signed in sees what ${name}'s personal key sees`,
      );
    }
    const alice: UserActor = {
      type: "user",
      userId: w.users.alice.id,
      via: "session",
      permissions: new Set(READ_PERMISSIONS),
    };
    t.same(
      await sorted(visibleConnectionIds(db, alice)),
      [w.conns.PA, w.conns.OA].sort(),
      "her own connection and her organization's",
    );
    t.equal(await connectionAccess(db, alice, w.conns.PB), "forbidden", "another user's: not visible");
    t.equal(await connectionAccess(db, alice, "00000000-0000-4000-8000-000000000000"), "absent");
    t.notOk(hasPermission(alice, "connections:write"), "an OAuth token reads only");
    t.equal(asManager(alice), alice, "a signed-in user may manage connections (the dashboard)");

    const system = systemActor("test");
    t.same(
      await sorted(visibleConnectionIds(db, system)),
      Object.values(w.conns).sort(),
      "the system sees every connection",
    );
    t.ok(hasPermission(system, "analytics:read"));
    t.throws(() => asManager(system), { code: "forbidden" }, "jobs never create or edit connections");
    const ingest = await keyOf(w.keys.ingest);
    t.same(await visibleConnectionIds(db, ingest), [w.conns.OB], "an ingestion key sees its gateway");
    t.throws(() => asManager(ingest), { code: "forbidden" });
  });
}
