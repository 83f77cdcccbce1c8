import t from "tap";
import { createUser } from "../../src/identity/accounts.js";
import { invitationMailText } from "../../src/identity/invitations.js";
import { testApp } from "../helpers/app.js";
import { FormClient as Browser } from "../helpers/dashboard.js";

/**
 * The accounts and organizations pages answered in-process (app.inject) on PGlite: the first run
 * and its refusal once done, form errors with their status and nothing changed, oversized
 * fields, unknown invitation links, CSRF. The browser test (test/browser/accounts.test.ts) drives
 * the same pages in Chromium.
 */

t.test("first run, profile, organizations: statuses and messages", async (t) => {
  const { app, ctx } = await testApp(t);
  const b = new Browser(app);
  const users = async () =>
    Number((await ctx.stores.db.query<{ n: string }>("SELECT count(*)::text AS n FROM users")).rows[0]?.n);

  const start = await b.get("/organizations");
  t.equal(start.statusCode, 303);
  t.equal(start.headers.location, "/setup", "no user: the first-run page");
  const setup = await b.get("/setup");
  t.equal(setup.statusCode, 200);
  t.match(setup.body, /no billing/);

  const noToken = await b.post("/setup", {
    email: "o@x.example",
    password: "password 1",
    confirm: "password 1",
  });
  t.equal(noToken.statusCode, 403, "no CSRF token: 403");
  t.equal(await users(), 0, "nothing created");

  const mismatch = await b.post(
    "/setup",
    { email: "o@x.example", password: "password 1", confirm: "password 2" },
    "/setup",
  );
  t.equal(mismatch.statusCode, 400);
  t.match(mismatch.body, /id="confirm"[^>]*aria-invalid="true"/);
  t.match(mismatch.body, /does not match/);
  const badEmail = await b.post(
    "/setup",
    { email: "x".repeat(500), password: "password 1", confirm: "password 1" },
    "/setup",
  );
  t.equal(badEmail.statusCode, 400, "an oversized e-mail: 400");
  t.match(badEmail.body, /at most 320 characters/);
  t.equal(await users(), 0);

  const ok = await b.post(
    "/setup",
    { email: "o@x.example", password: "password 1", confirm: "password 1" },
    "/setup",
  );
  t.equal(ok.statusCode, 303);
  t.equal(ok.headers.location, "/connections");
  t.match(String(ok.headers["set-cookie"]), /vigil_session=[^;]+;.*HttpOnly/);
  t.equal((await b.get("/setup")).headers.location, "/signin", "set up: /setup goes to /signin");
  const second = new Browser(app);
  const late = await second.post(
    "/setup",
    { email: "late@x.example", password: "password 1", confirm: "password 1" },
    "/signin",
  );
  t.equal(late.statusCode, 409, "a second set-up is refused");
  t.equal(await users(), 1);

  const profile = await b.get("/profile");
  t.equal(profile.statusCode, 200);
  t.match(profile.body, /o@x\.example/);
  t.match(profile.body, /href="\/profile\/keys"/);

  const tooLong = await b.post("/organizations", { name: "n".repeat(300) }, "/organizations");
  t.equal(tooLong.statusCode, 400, "an oversized name: 400");
  t.match(tooLong.body, /at most 200 characters/);
  const huge = await b.post("/organizations", { name: "n".repeat(20_000) }, "/organizations");
  t.equal(huge.statusCode, 413, "a form over 16 KiB: 413");
  t.match(huge.body, /larger than 16 KiB/);
  t.equal(
    (await b.get("/organizations")).body.includes("/organizations/"),
    false,
    "no organization was made",
  );

  const made = await b.post("/organizations", { name: "Ops <script>" }, "/organizations");
  t.equal(made.statusCode, 303);
  const orgPath = String(made.headers.location).split("?")[0] as string;
  const detail = await b.get(orgPath);
  t.match(detail.body, /Ops &lt;script&gt;/, "names are escaped");
  t.notMatch(detail.body, /Ops <script>/);

  const badRole = await b.post(`${orgPath}/invitations`, { email: "p@x.example", role: "king" }, orgPath);
  t.equal(badRole.statusCode, 400);
  t.match(badRole.body, /must be one of member, admin, owner/);
  const badEmail2 = await b.post(`${orgPath}/invitations`, { email: "nope", role: "member" }, orgPath);
  t.equal(badEmail2.statusCode, 400);
  t.match(badEmail2.body, /id="invite-email"[^>]*aria-invalid="true"/);
  const self = await b.post(`${orgPath}/invitations`, { email: "O@x.example", role: "member" }, orgPath);
  t.equal(self.statusCode, 409, "inviting a member: 409");
  t.match(self.body, /already a member/);

  // an invitation to an address that has an account: "Sign in to accept"; no second account
  await createUser(ctx.stores.db, { email: "has.account@x.example", password: "has account 1" });
  const invited = await b.post(
    `${orgPath}/invitations`,
    { email: "has.account@x.example", role: "admin" },
    orgPath,
  );
  t.equal(invited.statusCode, 303);
  const row = (
    await ctx.stores.db.query<{ id: string; body: string }>(
      "SELECT id, body FROM notifications WHERE kind = 'invitation'",
    )
  ).rows[0] as { id: string; body: string };
  const token = /\/invitations\/([A-Za-z0-9_-]{43})\n/.exec(
    await invitationMailText(ctx.stores.db, row, ctx.now()),
  )?.[1];
  const visitor = new Browser(app);
  const open = await visitor.get(`/invitations/${token}`);
  t.equal(open.statusCode, 200);
  t.match(open.body, /Sign in to accept/);
  t.match(open.body, new RegExp(`href="/signin\\?return_to=%2Finvitations%2F${token}"`));
  const sneak = await visitor.post(
    `/invitations/${token}`,
    { password: "another pass", confirm: "another pass" },
    "/signin",
  );
  t.equal(sneak.statusCode, 409, "no second account for an address that has one");
  t.match(sneak.body, /exists already: sign in/);
  t.equal(await users(), 2);

  const unknown = await b.get(`/invitations/${"a".repeat(43)}`);
  t.equal(unknown.statusCode, 404, "an unknown link: 404");
  t.match(unknown.body, /not valid/);
  const missingOrg = await b.get("/organizations/does-not-exist");
  t.equal(missingOrg.statusCode, 404);
});
