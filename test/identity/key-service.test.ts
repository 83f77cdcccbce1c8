import t from "tap";
import { PERMISSIONS, type Actor, type UserActor } from "../../src/core/actor.js";
import { ServiceError } from "../../src/core/errors.js";
import { addMember, createKey, createOrg, createUser } from "../../src/identity/accounts.js";
import {
  createKeyFor,
  keyOrganizationsFor,
  listKeysFor,
  revokeKeyFor,
} from "../../src/identity/key-service.js";
import { testApp } from "../helpers/app.js";

/**
 * Key management by a signed-in person (the dashboard's API tab): the CLI's rules (organization
 * keys need admin or owner), only the user's own keys can be revoked (another user's: not found,
 * nothing changes), every change is audited with the acting user, and a revoked key stops at once.
 */
const session = (userId: string): UserActor => ({
  type: "user",
  userId,
  via: "session",
  permissions: new Set(PERMISSIONS),
});

async function codeOf(p: Promise<unknown>): Promise<{ code: string; field?: string; message: string }> {
  try {
    await p;
  } catch (err) {
    if (err instanceof ServiceError) return { code: err.code, field: err.field, message: err.message };
    throw err;
  }
  return { code: "none", message: "" };
}

t.test("create, list, use and revoke keys as the signed-in user", async (t) => {
  const ta = await testApp(t);
  const { app, ctx } = ta;
  const db = ctx.stores.db;
  const owner = await createUser(db, { email: "owner@keys.example", plan: "enterprise" });
  const member = await createUser(db, { email: "member@keys.example", plan: "enterprise" });
  const admin = await createUser(db, { email: "admin@keys.example", plan: "enterprise" });
  const org = await createOrg(db, { name: "Keys Org", owner: owner.id, plan: "enterprise" });
  const other = await createOrg(db, { name: "Elsewhere", owner: member.id, plan: "enterprise" });
  await addMember(db, { org: org.id, user: member.id, role: "member" });
  await addMember(db, { org: org.id, user: admin.id, role: "admin" });
  const get = (key: string) =>
    app.inject({ method: "GET", url: "/v1/connections", headers: { authorization: `Bearer ${key}` } });
  const audits = async (event: string) =>
    (
      await db.query<{ body: string }>(
        "SELECT body FROM notifications WHERE audit_event = $1 ORDER BY created_at",
        [event],
      )
    ).rows.map((r) => r.body);

  // a personal key: shown once, works against the REST API, listed without its secret
  const made = await createKeyFor(ctx, session(owner.id), {
    name: "  CI deploy ",
    permissions: ["connections:read", "usage:read"],
  });
  t.match(made.key, /^vgl_[A-Za-z0-9_-]{32}$/);
  t.equal(made.name, "CI deploy", "the name is trimmed");
  t.equal(made.kind, "personal");
  t.equal((await get(made.key)).statusCode, 200, "the new key authenticates");
  const listed = await listKeysFor(ctx, session(owner.id));
  t.equal(listed.length, 1);
  t.same(listed[0]?.permissions, ["connections:read", "usage:read"]);
  t.equal(listed[0]?.prefix, made.key.slice(0, 12));
  t.notMatch(JSON.stringify(listed), made.key, "the list never holds the key");
  const created = await audits("api_key_created");
  t.equal(created.length, 1, "creation is audited");
  t.match(created[0], `was created by user ${owner.id}`, "with the acting user as by");
  t.notMatch(created[0], made.key, "the audit never holds the key");

  // organization keys: admin and owner may; a member, a stranger or a made-up organization may not
  t.same(
    (await keyOrganizationsFor(ctx, session(member.id))).map((o) => o.name),
    ["Elsewhere"],
    "a member is offered only organizations where they are admin or owner",
  );
  const orgKey = await createKeyFor(ctx, session(admin.id), {
    name: "org reader",
    permissions: ["connections:read"],
    organizationId: org.id,
  });
  t.equal(orgKey.kind, "organization");
  t.equal((await get(orgKey.key)).statusCode, 200);
  for (const [who, orgId] of [
    [member.id, org.id],
    [owner.id, other.id],
    [owner.id, "00000000-0000-0000-0000-000000000000"],
  ] as const) {
    const e = await codeOf(
      createKeyFor(ctx, session(who), { name: "x", permissions: ["usage:read"], organizationId: orgId }),
    );
    t.equal(e.code, "forbidden", "no admin/owner role there: 403");
    t.match(e.message, /admin or owner/);
  }
  t.equal((await listKeysFor(ctx, session(member.id))).length, 0, "nothing was created for the member");

  // bad input names the field
  const bad: [Parameters<typeof createKeyFor>[2], string][] = [
    [{ name: "  ", permissions: ["usage:read"] }, "name"],
    [{ name: "x".repeat(101), permissions: ["usage:read"] }, "name"],
    [{ name: "bell\u0007", permissions: ["usage:read"] }, "name"],
    [{ name: "ok", permissions: [] }, "permissions"],
    [{ name: "ok", permissions: ["usage:read", "root"] }, "permissions"],
  ];
  for (const [input, field] of bad) {
    const e = await codeOf(createKeyFor(ctx, session(owner.id), input));
    t.same(
      [e.code, e.field],
      ["invalid_input", field],
      `${JSON.stringify(input).slice(0, 60)}: 400 on ${field}`,
    );
  }
  const narrow: UserActor = { ...session(owner.id), permissions: new Set(["usage:read"] as const) };
  t.equal(
    (await codeOf(createKeyFor(ctx, narrow, { name: "wider", permissions: ["connections:delete"] }))).code,
    "forbidden",
    "a key cannot carry a permission its maker does not hold",
  );

  // only a person through a session manages keys: not an API key, not an MCP (OAuth) token
  const viaKey: Actor = {
    type: "api_key",
    keyId: made.id,
    userId: owner.id,
    scope: "personal",
    organizationId: null,
    permissions: new Set(PERMISSIONS),
  };
  const viaOauth: Actor = { ...session(owner.id), via: "oauth" };
  for (const a of [viaKey, viaOauth]) {
    t.equal(
      (await codeOf(createKeyFor(ctx, a, { name: "x", permissions: ["usage:read"] }))).code,
      "forbidden",
    );
    t.equal((await codeOf(revokeKeyFor(ctx, a, made.id))).code, "forbidden");
    t.equal((await codeOf(listKeysFor(ctx, a))).code, "forbidden");
  }
  t.equal(await db.query("SELECT 1 FROM api_keys WHERE name = 'x'").then((r) => r.rows.length), 0);

  // revoking: another user's key is not found and keeps working; the owner's stops at once
  t.equal((await codeOf(revokeKeyFor(ctx, session(admin.id), made.id))).code, "not_found");
  t.equal(
    (await codeOf(revokeKeyFor(ctx, session(owner.id), orgKey.id))).code,
    "not_found",
    "even as the organization's owner",
  );
  t.equal((await codeOf(revokeKeyFor(ctx, session(owner.id), "no-such-key"))).code, "not_found");
  t.equal((await get(made.key)).statusCode, 200, "warm in the key cache");
  t.equal((await get(orgKey.key)).statusCode, 200, "nothing changed");
  t.equal((await audits("api_key_revoked")).length, 0, "nothing audited");

  const r = await revokeKeyFor(ctx, session(owner.id), made.id);
  t.same(r, { id: made.id, revoked: true, already: false });
  t.equal((await get(made.key)).statusCode, 401, "a revoked key stops at once (the cache was told)");
  const again = await revokeKeyFor(ctx, session(owner.id), made.id);
  t.equal(again.already, true, "revoking again changes nothing");
  const revoked = await audits("api_key_revoked");
  t.equal(revoked.length, 1, "audited once");
  t.match(revoked[0], `was revoked by user ${owner.id}`);
  const after = await listKeysFor(ctx, session(owner.id));
  t.ok(after[0]?.revokedAt instanceof Date, "the list shows when it was revoked");

  // an ingestion key of the user's gateway is the user's too: listed, revocable
  const personal = await createKey(db, { user: owner.id, permissions: [...PERMISSIONS] });
  const gw = await app.inject({
    method: "POST",
    url: "/v1/connections",
    headers: { authorization: `Bearer ${personal.key}` },
    payload: { service_type: "gateway", service_name: "edge gw" },
  });
  t.equal(gw.statusCode, 201, gw.body);
  const ingest = (await listKeysFor(ctx, session(owner.id))).find((k) => k.kind === "usage_ingestion");
  t.equal(ingest?.connection?.name, "edge gw");
  t.same(ingest?.permissions, []);
});
