import type { FastifyInstance } from "fastify";
import { addMember, createKey, createOrg, createUser, revokeKey } from "../../src/identity/accounts.js";
import { PERMISSIONS } from "../../src/core/actor.js";
import type { TestApp } from "./app.js";

/**
 * A small world of tenants, made through the same account verbs the admin command uses and the
 * same API a user calls:
 *   alice: owner of org A; bob: owner of org B; dave: plain member of org A; carol: no organization.
 * Every credential is a distinct string, so a test can search any response for a leak.
 */
export async function seedTenants({ app, ctx }: TestApp, plan = "enterprise") {
  const db = ctx.stores.db;
  const alice = await createUser(db, { email: "alice@a.example", plan });
  const bob = await createUser(db, { email: "bob@b.example", plan });
  const dave = await createUser(db, { email: "dave@a.example", plan });
  const carol = await createUser(db, { email: "carol@c.example", plan });
  const orgA = await createOrg(db, { name: "Org A", owner: alice.id, plan });
  const orgB = await createOrg(db, { name: "Org B", owner: bob.id, plan });
  await addMember(db, { org: orgA.id, user: dave.id, role: "member" });
  const all = [...PERMISSIONS];
  const keys = {
    alicePersonal: (await createKey(db, { user: alice.id, permissions: all })).key,
    aliceOrgA: (await createKey(db, { user: alice.id, org: orgA.id, permissions: all })).key,
    aliceReadOnly: (await createKey(db, { user: alice.id, permissions: ["connections:read"] })).key,
    bobPersonal: (await createKey(db, { user: bob.id, permissions: all })).key,
    bobOrgB: (await createKey(db, { user: bob.id, org: orgB.id, permissions: all })).key,
    davePersonal: (await createKey(db, { user: dave.id, permissions: all })).key,
    carolPersonal: (await createKey(db, { user: carol.id, permissions: all })).key,
    revoked: "",
    ingest: "",
  };
  const revoked = await createKey(db, { user: alice.id, permissions: all });
  await revokeKey(db, revoked.id, new Date());
  keys.revoked = revoked.key;

  const secrets: string[] = [];
  const create = async (key: string, body: Record<string, unknown>) => {
    for (const f of ["api_key", "api_token"])
      if (typeof body[f] === "string") secrets.push(body[f] as string);
    const res = await call(app, key, "POST", "/v1/connections", body);
    if (res.statusCode !== 201) throw new Error(`seeding failed: ${res.statusCode} ${res.body}`);
    return res.json() as { connection: { id: string }; ingest_api_key: string | null };
  };
  const PA = (
    await create(keys.alicePersonal, {
      service_type: "workflow_a",
      service_name: "alice n8n",
      base_url: "http://127.0.0.1:1",
      api_key: "secret-key-PA-7f3a",
    })
  ).connection.id;
  const OA = (
    await create(keys.alicePersonal, {
      service_type: "workflow_b",
      service_name: "org A make",
      api_token: "secret-token-OA-91bc",
      region: "eu1",
      organization_id: orgA.id,
    })
  ).connection.id;
  const ob = await create(keys.bobOrgB, { service_type: "gateway", service_name: "org B gateway" });
  const OB = ob.connection.id;
  keys.ingest = ob.ingest_api_key as string;
  secrets.push(keys.ingest);
  const PB = (
    await create(keys.bobPersonal, {
      service_type: "workflow_a",
      service_name: "bob n8n",
      base_url: "http://127.0.0.1:2",
      api_key: "secret-key-PB-55aa",
    })
  ).connection.id;
  const PC = (
    await create(keys.carolPersonal, {
      service_type: "workflow_a",
      service_name: "carol n8n",
      base_url: "http://127.0.0.1:3",
      api_key: "secret-key-PC-c0de",
    })
  ).connection.id;

  return {
    users: { alice, bob, dave, carol },
    orgs: { orgA, orgB },
    keys,
    conns: { PA, OA, OB, PB, PC },
    secrets,
  };
}

export type Tenants = Awaited<ReturnType<typeof seedTenants>>;

export function call(
  app: FastifyInstance,
  key: string | null,
  method: "GET" | "POST" | "PUT" | "DELETE",
  url: string,
  body?: unknown,
) {
  return app.inject({
    method,
    url,
    headers: key ? { authorization: `Bearer ${key}` } : {},
    ...(body === undefined ? {} : { payload: body as Record<string, unknown> }),
  });
}
