import t, { type Test } from "tap";
import { PERMISSIONS, type UserActor } from "../../src/core/actor.js";
import { ServiceError } from "../../src/core/errors.js";
import { addMember, createUser } from "../../src/identity/accounts.js";
import {
  acceptInvitation,
  acceptInvitationAsNewUser,
  invitationForToken,
  invitationMailText,
  inviteMember,
  listInvitations,
  revokeInvitation,
  TOKEN_PLACEHOLDER,
  UnsendableInvitation,
} from "../../src/identity/invitations.js";
import {
  changeRole,
  createOrganization,
  getOrganization,
  leaveOrganization,
  listMyOrganizations,
  removeMember,
  renameOrganization,
} from "../../src/identity/organizations.js";
import { changePassword, createFirstOwner } from "../../src/identity/profile.js";
import { verifyPassword } from "../../src/identity/passwords.js";
import { listAlerts } from "../../src/notifications/alerts.js";
import type { AppContext } from "../../src/core/context.js";
import { testApp } from "../helpers/app.js";

/**
 * The organization rules of the core (src/identity/organizations.ts, invitations.ts, profile.ts)
 * on a real PGlite: who may do what, the last-owner rule, audits in the alert history, the
 * invitation's single-use token that is never stored, the first run.
 */

const user = (userId: string): UserActor => ({
  type: "user",
  userId,
  via: "session",
  permissions: new Set(PERMISSIONS),
});

async function rejects(t: Test, p: Promise<unknown>, code: string, message?: RegExp, label?: string) {
  try {
    await p;
    t.fail(`${label ?? code}: expected a ${code} error`);
  } catch (err) {
    t.ok(err instanceof ServiceError, `${label ?? code}: a ServiceError`);
    t.equal((err as ServiceError).code, code, label ?? code);
    if (message) t.match((err as Error).message, message);
  }
}

async function people(ctx: AppContext) {
  const owner = await createUser(ctx.stores.db, { email: "owner@org.example", password: "owner-pass-1" });
  const admin = await createUser(ctx.stores.db, { email: "admin@org.example", password: "admin-pass-1" });
  const member = await createUser(ctx.stores.db, { email: "member@org.example", password: "member-pass-1" });
  const outsider = await createUser(ctx.stores.db, { email: "out@other.example", password: "outsider-1" });
  const org = await createOrganization(ctx, user(owner.id), { name: "Acme" });
  await addMember(ctx.stores.db, { org: org.id, user: admin.id, role: "admin" });
  await addMember(ctx.stores.db, { org: org.id, user: member.id, role: "member" });
  return { owner, admin, member, outsider, org };
}

const roles = async (ctx: AppContext, actor: UserActor, orgId: string) =>
  Object.fromEntries((await getOrganization(ctx, actor, orgId)).members.map((m) => [m.email, m.role]));

t.test("roles: who may rename, change roles and remove; the last owner stays", async (t) => {
  const { ctx } = await testApp(t);
  const { owner, admin, member, outsider, org } = await people(ctx);
  const before = await roles(ctx, user(owner.id), org.id);
  t.same(before, {
    "owner@org.example": "owner",
    "admin@org.example": "admin",
    "member@org.example": "member",
  });
  t.equal((await listMyOrganizations(ctx, user(member.id)))[0]?.members, 3);

  // an outsider does not learn the organization exists
  await rejects(t, getOrganization(ctx, user(outsider.id), org.id), "not_found", /no organization/);
  await rejects(t, renameOrganization(ctx, user(outsider.id), org.id, { name: "Mine" }), "not_found");
  await rejects(t, leaveOrganization(ctx, user(outsider.id), org.id), "not_found");

  // a member manages nothing
  await rejects(
    t,
    renameOrganization(ctx, user(member.id), org.id, { name: "Hijack" }),
    "forbidden",
    /admin or owner/,
  );
  await rejects(
    t,
    changeRole(ctx, user(member.id), org.id, { userId: member.id, role: "owner" }),
    "forbidden",
  );
  await rejects(t, removeMember(ctx, user(member.id), org.id, { userId: admin.id }), "forbidden");
  await rejects(
    t,
    inviteMember(ctx, user(member.id), org.id, { email: "x@y.example", role: "member" }),
    "forbidden",
  );
  t.same(await roles(ctx, user(owner.id), org.id), before, "nothing changed");
  t.equal((await getOrganization(ctx, user(owner.id), org.id)).name, "Acme");

  // an admin manages members, but not owners
  await rejects(
    t,
    changeRole(ctx, user(admin.id), org.id, { userId: member.id, role: "owner" }),
    "forbidden",
    /only an owner/,
  );
  await rejects(
    t,
    changeRole(ctx, user(admin.id), org.id, { userId: owner.id, role: "member" }),
    "forbidden",
  );
  await rejects(t, removeMember(ctx, user(admin.id), org.id, { userId: owner.id }), "forbidden");
  await rejects(
    t,
    inviteMember(ctx, user(admin.id), org.id, { email: "o@y.example", role: "owner" }),
    "forbidden",
  );
  await changeRole(ctx, user(admin.id), org.id, { userId: member.id, role: "admin" });
  t.equal((await roles(ctx, user(owner.id), org.id))["member@org.example"], "admin");
  await rejects(
    t,
    changeRole(ctx, user(admin.id), org.id, { userId: member.id, role: "boss" }),
    "invalid_input",
    /role/,
  );
  await rejects(t, renameOrganization(ctx, user(admin.id), org.id, { name: "   " }), "invalid_input", /name/);
  await rejects(
    t,
    renameOrganization(ctx, user(admin.id), org.id, { name: "x".repeat(201) }),
    "invalid_input",
  );
  await renameOrganization(ctx, user(admin.id), org.id, { name: "Acme Corp" });
  t.equal((await getOrganization(ctx, user(member.id), org.id)).name, "Acme Corp");
  await rejects(
    t,
    changeRole(ctx, user(admin.id), org.id, { userId: outsider.id, role: "admin" }),
    "not_found",
  );

  // the last owner can neither leave nor be demoted nor removed
  await rejects(t, leaveOrganization(ctx, user(owner.id), org.id), "conflict", /last owner/);
  await rejects(
    t,
    changeRole(ctx, user(owner.id), org.id, { userId: owner.id, role: "admin" }),
    "conflict",
    /last owner/,
  );
  t.equal((await roles(ctx, user(owner.id), org.id))["owner@org.example"], "owner");

  // with a second owner, the first may step down and leave
  await changeRole(ctx, user(owner.id), org.id, { userId: admin.id, role: "owner" });
  await changeRole(ctx, user(owner.id), org.id, { userId: owner.id, role: "admin" });
  await leaveOrganization(ctx, user(owner.id), org.id);
  await rejects(
    t,
    getOrganization(ctx, user(owner.id), org.id),
    "not_found",
    undefined,
    "left: no longer sees it",
  );
  await removeMember(ctx, user(admin.id), org.id, { userId: member.id });
  t.same(await roles(ctx, user(admin.id), org.id), { "admin@org.example": "owner" });
  await rejects(t, leaveOrganization(ctx, user(admin.id), org.id), "conflict", /last owner/);

  // every change is an audit entry in the alert history of the organization
  const alerts = await listAlerts(ctx, user(admin.id), { limit: 100 });
  const texts = alerts.rows.filter((a) => a.kind === "audit").map((a) => a.body);
  t.ok(
    texts.some((b) => /member@org\.example is now admin .*was member/.test(b)),
    "role change audited",
  );
  t.ok(
    texts.some((b) => /is now called "Acme Corp"/.test(b)),
    "rename audited",
  );
  t.ok(
    texts.some((b) => /owner@org\.example left the organization/.test(b)),
    "leaving audited",
  );
  t.ok(
    texts.some((b) => /member@org\.example was removed .* by user /.test(b)),
    "removal audited, with who did it",
  );
});

t.test("two owners demoting each other at once keep one owner", async (t) => {
  const { ctx } = await testApp(t);
  const { owner, admin, org } = await people(ctx);
  await changeRole(ctx, user(owner.id), org.id, { userId: admin.id, role: "owner" });
  const results = await Promise.allSettled([
    changeRole(ctx, user(owner.id), org.id, { userId: admin.id, role: "member" }),
    changeRole(ctx, user(admin.id), org.id, { userId: owner.id, role: "member" }),
  ]);
  const owners = Object.values(await roles(ctx, user(owner.id), org.id));
  t.equal(owners.filter((r) => r === "owner").length, 1, "one owner left");
  t.equal(results.filter((r) => r.status === "rejected").length, 1, "one of the two was refused");
});

t.test("invitations: single-use token made at sending, never stored, expiring", async (t) => {
  const { ctx } = await testApp(t);
  const { owner, admin, member, outsider, org } = await people(ctx);
  const inv = await inviteMember(ctx, user(admin.id), org.id, { email: "New@Person.example", role: "admin" });
  t.equal(inv.state, "pending");
  t.equal(new Date(inv.expiresAt).getTime() - new Date(inv.createdAt).getTime(), 7 * 86_400_000, "7 days");
  await rejects(
    t,
    inviteMember(ctx, user(admin.id), org.id, { email: "not an address", role: "member" }),
    "invalid_input",
    /email/,
  );
  await rejects(
    t,
    inviteMember(ctx, user(admin.id), org.id, { email: "member@org.example", role: "admin" }),
    "conflict",
    /already a member/,
  );
  await rejects(
    t,
    inviteMember(ctx, user(outsider.id), org.id, { email: "z@z.example", role: "member" }),
    "not_found",
  );

  // the outbox row: to the invitee, the organization's, with a placeholder instead of the link
  const rows = await ctx.stores.db.query<{
    id: string;
    body: string;
    recipient: string;
    webhook_id: string | null;
  }>("SELECT id, body, recipient, webhook_id FROM notifications WHERE kind = 'invitation'");
  t.equal(rows.rows.length, 1);
  const n = rows.rows[0] as { id: string; body: string; recipient: string };
  t.equal(n.recipient, "New@Person.example");
  t.ok(n.body.includes(`/invitations/${TOKEN_PLACEHOLDER}`));
  const history = await listAlerts(ctx, user(member.id), { limit: 100 });
  const shown = history.rows.find((a) => a.kind === ("invitation" as typeof a.kind));
  t.ok(shown, "the invitation is in the organization's alert history");
  t.notMatch(shown?.body ?? "", /\/invitations\/[A-Za-z0-9_-]{43}/, "without a usable link");

  // delivery makes the token; only its hash is stored
  const text = await invitationMailText(ctx.stores.db, n, ctx.now());
  const token = /\/invitations\/([A-Za-z0-9_-]{43})\n/.exec(text)?.[1] as string;
  t.ok(token, "the e-mail carries the link");
  const dump = await ctx.stores.db.query("SELECT row_to_json(i)::text AS j FROM invitations i");
  const notif = await ctx.stores.db.query("SELECT row_to_json(n)::text AS j FROM notifications n");
  t.notOk(JSON.stringify([dump.rows, notif.rows]).includes(token), "the token is nowhere in the database");

  const view = await invitationForToken(ctx, token);
  t.equal(view.organizationName, "Acme");
  t.equal(view.role, "admin");
  t.equal(view.userExists, false);
  await rejects(t, invitationForToken(ctx, "x".repeat(43)), "not_found");
  await rejects(
    t,
    acceptInvitationAsNewUser(ctx, token, { password: "short", confirm: "short" }),
    "invalid_input",
    /8 characters/,
  );
  await rejects(
    t,
    acceptInvitationAsNewUser(ctx, token, { password: "long enough 1", confirm: "long enough 2" }),
    "invalid_input",
    /match/,
  );
  const made = await acceptInvitationAsNewUser(ctx, token, {
    password: "long enough 1",
    confirm: "long enough 1",
  });
  t.equal(made.role, "admin");
  t.equal((await roles(ctx, user(owner.id), org.id))["New@Person.example"], "admin", "joined with the role");
  await rejects(t, acceptInvitation(ctx, user(outsider.id), token), "conflict", /already used/, "second use");
  t.equal((await listInvitations(ctx, user(member.id), org.id))[0]?.state, "accepted");

  // expired, revoked; a signed-in user with another e-mail may accept
  const other = await inviteMember(ctx, user(owner.id), org.id, {
    email: "someone@else.example",
    role: "member",
  });
  const n2 = (
    await ctx.stores.db.query<{ id: string; body: string }>(
      "SELECT n.id, n.body FROM notifications n JOIN invitations i ON i.notification_id = n.id WHERE i.id = $1",
      [other.id],
    )
  ).rows[0] as { id: string; body: string };
  const token2 = /\/invitations\/([A-Za-z0-9_-]{43})\n/.exec(
    await invitationMailText(ctx.stores.db, n2, ctx.now()),
  )?.[1] as string;
  const realNow = ctx.now;
  ctx.now = () => new Date(realNow().getTime() + 8 * 86_400_000);
  await rejects(t, acceptInvitation(ctx, user(outsider.id), token2), "conflict", /expired/);
  ctx.now = realNow;
  const joined = await acceptInvitation(ctx, user(outsider.id), token2);
  t.equal(joined.role, "member", "the outsider's account joined through the link");

  const third = await inviteMember(ctx, user(owner.id), org.id, { email: "third@x.example", role: "member" });
  const n3 = (
    await ctx.stores.db.query<{ id: string; body: string }>(
      "SELECT n.id, n.body FROM notifications n JOIN invitations i ON i.notification_id = n.id WHERE i.id = $1",
      [third.id],
    )
  ).rows[0] as { id: string; body: string };
  await rejects(t, revokeInvitation(ctx, user(member.id), org.id, third.id), "forbidden");
  await revokeInvitation(ctx, user(admin.id), org.id, third.id);
  await t.rejects(
    invitationMailText(ctx.stores.db, n3, ctx.now()),
    UnsendableInvitation,
    "a revoked invitation is not sent",
  );
});

t.test("first run and password", async (t) => {
  const { ctx } = await testApp(t);
  await rejects(
    t,
    createFirstOwner(ctx, { email: "a@b.example", password: "short", confirm: "short" }),
    "invalid_input",
  );
  const results = await Promise.allSettled([
    createFirstOwner(ctx, { email: "first@b.example", password: "first pass 1", confirm: "first pass 1" }),
    createFirstOwner(ctx, { email: "second@b.example", password: "second pass", confirm: "second pass" }),
  ]);
  t.equal(results.filter((r) => r.status === "fulfilled").length, 1, "one owner");
  const count = await ctx.stores.db.query<{ n: string }>("SELECT count(*)::text AS n FROM users");
  t.equal(count.rows[0]?.n, "1");
  const owner = (
    results.find((r) => r.status === "fulfilled") as PromiseFulfilledResult<{ id: string; plan: string }>
  ).value;
  t.equal(owner.plan, "enterprise");

  await rejects(
    t,
    changePassword(ctx, user(owner.id), {
      current: "wrong one",
      password: "new pass 12",
      confirm: "new pass 12",
    }),
    "invalid_input",
    /not right/,
  );
  const hash = async () =>
    (
      await ctx.stores.db.query<{ h: string }>("SELECT password_hash AS h FROM users WHERE id = $1", [
        owner.id,
      ])
    ).rows[0]?.h as string;
  const current = (await verifyPassword("first pass 1", await hash())) ? "first pass 1" : "second pass";
  t.ok(await verifyPassword(current, await hash()), "nothing changed");
  await changePassword(ctx, user(owner.id), { current, password: "new pass 12", confirm: "new pass 12" });
  t.ok(await verifyPassword("new pass 12", await hash()), "the new password works");
});
