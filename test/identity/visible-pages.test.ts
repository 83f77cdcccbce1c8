import t from "tap";
import { addMember, createOrg, createUser } from "../../src/identity/accounts.js";
import { visibleConnectionsCondition, visibleIdsPage } from "../../src/identity/repository.js";
import { visibleConnectionIdPage } from "../../src/identity/visibility.js";
import type { Actor } from "../../src/core/actor.js";
import { testApp } from "../helpers/app.js";

/**
 * A user's pages of visible connection ids (personal connections and every organization they
 * belong to, asked per source and merged) are exactly the pages of the one visibility condition,
 * in both orders, at every page size, from every cursor; another tenant's connections never
 * appear.
 */
t.test("a user's id pages equal the visibility rule's pages", async (t) => {
  const ta = await testApp(t);
  const db = ta.ctx.stores.db;
  const ann = await createUser(db, { email: "ann@a.example", plan: "enterprise" });
  const ben = await createUser(db, { email: "ben@b.example", plan: "enterprise" });
  const org1 = await createOrg(db, { name: "One", owner: ann.id, plan: "enterprise" });
  const org2 = await createOrg(db, { name: "Two", owner: ben.id, plan: "enterprise" });
  const org3 = await createOrg(db, { name: "Three", owner: ben.id, plan: "enterprise" });
  await addMember(db, { org: org2.id, user: ann.id, role: "member" });
  // ids interleave across sources; mixed case and digits so byte order differs from a locale's
  const add = (id: string, user: string, org: string | null) =>
    db.query(
      `INSERT INTO connections (id, user_id, organization_id, service_type, service_name, status, base_url)
       VALUES ($1, $2, $3, 'workflow_a', $1, 'active', 'http://127.0.0.1:1')`,
      [id, user, org],
    );
  const names = ["a", "B", "c", "D", "e", "F", "g", "_h", "0i", "Zj"];
  for (const [i, n] of names.entries()) {
    await add(`${n}-ann-personal-${i}`, ann.id, null);
    await add(`${n}-org1-${i}`, ann.id, org1.id);
    await add(`${n}-org2-${i}`, ben.id, org2.id);
    await add(`${n}-org3-${i}`, ben.id, org3.id); // not ann's
    await add(`${n}-ben-personal-${i}`, ben.id, null); // not ann's
  }
  const actors: [string, Actor][] = [
    ["signed-in user", { type: "user", userId: ann.id } as Actor],
    ["personal API key", { type: "api_key", scope: "personal", userId: ann.id } as unknown as Actor],
  ];
  for (const [label, actor] of actors) {
    const rule = (param: (v: unknown) => string) => visibleConnectionsCondition(actor, param);
    for (const order of ["asc", "desc"] as const) {
      const all = await visibleIdsPage(db, rule, { order, limit: 1000 });
      t.equal(all.length, 30, `${label}: 30 visible (personal, org One, org Two)`);
      t.notOk(
        all.some((id) => id.includes("org3") || id.includes("ben-personal")),
        "nothing of another tenant",
      );
      const sorted = [...all].sort();
      t.same(all, order === "asc" ? sorted : sorted.reverse(), "byte order");
      for (const limit of [1, 2, 3, 7, 30, 31]) {
        const walked: string[] = [];
        let after: string | undefined;
        for (let guard = 0; guard < 40; guard++) {
          const page = await visibleConnectionIdPage(db, actor, {
            ...(after !== undefined ? { after } : {}),
            order,
            limit,
          });
          const expected = await visibleIdsPage(db, rule, {
            ...(after !== undefined ? { after } : {}),
            order,
            limit,
          });
          t.same(page, expected, `${label}, ${order}, pages of ${limit}: the same page`);
          walked.push(...page);
          if (page.length < limit) break;
          after = page[page.length - 1];
        }
        t.same(walked, all, `${label}, ${order}, pages of ${limit}: every visible id once`);
      }
    }
  }
});
