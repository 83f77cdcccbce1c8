import type { AddressInfo } from "node:net";
import pg from "pg";
import type { BrowserContext, Page } from "playwright-core";
import { SMTPServer } from "smtp-server";
import t, { type Test } from "tap";
import { freshDatabaseUrl, requireBackend } from "../helpers/backends.js";
import { axe, browser, newPage, requireChromium, shot, signIn, vigil } from "./harness.js";

/**
 * Accounts and organizations in a real browser against a real `vigil serve` on PostgreSQL (so
 * the test can expire an invitation with SQL while the server runs), with a local SMTP server
 * that captures the invitation e-mails: the first run, sign-out and in, the password change,
 * organizations (create, invite, accept as a new user, change a role, the member's refused admin
 * action, the last owner), reused and expired links, a missing CSRF token, another tenant's
 * organization. axe-core on every page.
 */

interface Mail {
  to: string;
  subject: string;
  text: string;
}

/** A local SMTP server keeping every message, decoded enough to read a link. */
async function smtpCapture(t: Test) {
  const received: Mail[] = [];
  const server = new SMTPServer({
    disabledCommands: ["STARTTLS", "AUTH"],
    logger: false,
    onData(stream, session, callback) {
      let data = "";
      stream.on("data", (c: Buffer) => {
        data += c.toString();
      });
      stream.on("end", () => {
        const [head = "", ...rest] = data.split(/\r?\n\r?\n/);
        let body = rest.join("\n\n");
        if (/content-transfer-encoding:\s*quoted-printable/i.test(head))
          body = body
            .replace(/=\r?\n/g, "")
            .replace(/=([0-9A-F]{2})/g, (_m, h: string) => String.fromCharCode(parseInt(h, 16)));
        received.push({
          to: session.envelope.rcptTo.map((r) => r.address).join(","),
          subject: /^Subject:\s*(.*)$/im.exec(head)?.[1] ?? "",
          text: body,
        });
        callback();
      });
    },
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  return {
    url: `smtp://127.0.0.1:${(server.server.address() as AddressInfo).port}`,
    /** The invitation link of the newest e-mail to `to`, waiting for it. */
    async linkTo(to: string, timeoutMs = 20_000): Promise<string> {
      const end = Date.now() + timeoutMs;
      for (;;) {
        const m = [...received].reverse().find((x) => x.to.toLowerCase() === to.toLowerCase());
        const link = m && /(http:\/\/\S+\/invitations\/[A-Za-z0-9_-]{43})/.exec(m.text)?.[1];
        if (link) return link;
        if (Date.now() > end) throw new Error(`no invitation e-mail to ${to}: ${JSON.stringify(received)}`);
        await new Promise((r) => setTimeout(r, 200));
      }
    },
    received,
  };
}

/** The CSRF token of the page's first form. */
const csrfOf = (page: Page) => page.locator('input[name="_csrf"]').first().inputValue();

/** A form post from the page's context (its cookies), as a crafted request would be. */
async function post(context: BrowserContext, url: string, form: Record<string, string>) {
  const res = await context.request.post(url, { form, maxRedirects: 0, headers: { accept: "text/html" } });
  return { status: res.status(), text: await res.text(), location: res.headers().location };
}

t.test("first run, password, organizations and invitations", async (t) => {
  if (!requireChromium(t)) return;
  if (!(await requireBackend(t, "postgres"))) return;
  const smtp = await smtpCapture(t);
  const databaseUrl = await freshDatabaseUrl(t);
  const v = await vigil(t, {
    DATABASE_URL: databaseUrl,
    SMTP_URL: smtp.url,
    MAIL_FROM: "Vigil <vigil@test.example>",
  });
  const sql = new pg.Client({ connectionString: databaseUrl });
  await sql.connect();
  t.teardown(() => sql.end());
  const b = await browser(t);

  // --- first run: every page goes to /setup; it creates the owner and signs them in
  const { page: owner, context: ownerCtx } = await newPage(t, b);
  await owner.goto(`${v.url}/connections`);
  t.match(owner.url(), /\/setup$/, "no user yet: the first-run page");
  await t.test("setup page", async (t) => {
    t.match(await owner.locator("main").innerText(), /no billing/i, "the page says there is no billing");
    await axe(t, owner, "setup");
  });
  await shot(owner, "setup");
  await owner.getByLabel("Email").fill("owner@acme.example");
  await owner.getByLabel("Password", { exact: true }).fill("short");
  await owner.getByLabel("Confirm password").fill("short");
  await owner.getByRole("button", { name: /create the owner/i }).click();
  t.match(
    await owner.locator("#password-error").innerText(),
    /at least 8 characters/,
    "a short password is refused",
  );
  t.equal(await owner.getByLabel("Email").inputValue(), "owner@acme.example", "the e-mail is kept");
  await axe(t, owner, "setup with errors");
  await owner.getByLabel("Password", { exact: true }).fill("owner password 1");
  await owner.getByLabel("Confirm password").fill("owner password 1");
  await owner.getByRole("button", { name: /create the owner/i }).click();
  await owner.waitForURL(/\/connections$/);
  await owner.goto(`${v.url}/profile`);
  t.match(owner.url(), /\/profile$/, "signed in after the first run");
  t.ok(await owner.getByRole("button", { name: "Sign out" }).isVisible());
  const session = (await ownerCtx.cookies()).find((c) => c.name === "vigil_session");
  t.ok(session?.httpOnly, "session cookie HttpOnly");
  t.equal(session?.sameSite, "Lax");
  const again = await owner.goto(`${v.url}/setup`);
  t.match(owner.url(), /\/signin/, "once set up, /setup goes to /signin");
  t.equal(again?.status(), 200);
  t.equal(
    (await sql.query("SELECT plan FROM users")).rows[0]?.plan,
    "enterprise",
    "the owner is on enterprise",
  );

  // --- sign out and in
  await owner.goto(`${v.url}/profile`);
  await owner.getByRole("button", { name: "Sign out" }).click();
  await owner.waitForURL(/\/signin$/);
  await signIn(owner, v.url, "owner@acme.example", "owner password 1");
  await owner.goto(`${v.url}/profile`);
  t.match(owner.url(), /\/profile$/, "signed in again");

  // --- profile and password
  await t.test("profile", async (t) => {
    const main = await owner.locator("main").innerText();
    t.match(main, /owner@acme\.example/);
    t.match(main, /enterprise/);
    t.ok(await owner.getByRole("link", { name: "API keys" }).first().isVisible(), "a link to the API keys");
    await axe(t, owner, "profile");
  });
  await owner.getByLabel("Current password").fill("not my password");
  await owner.getByLabel("New password", { exact: true }).fill("owner password 2");
  await owner.getByLabel("Confirm the new password").fill("owner password 2");
  const wrong = await Promise.all([
    owner.waitForResponse((r) => r.url().endsWith("/profile/password")),
    owner.getByRole("button", { name: "Change password" }).click(),
  ]);
  t.equal(wrong[0].status(), 400, "a wrong current password: 400");
  t.match(await owner.locator("#current_password-error").innerText(), /not right/);
  t.equal(await owner.getByLabel("Current password").getAttribute("aria-invalid"), "true");
  await axe(t, owner, "profile with errors");
  await owner.getByLabel("Current password").fill("owner password 1");
  await owner.getByLabel("New password", { exact: true }).fill("owner password 2");
  await owner.getByLabel("Confirm the new password").fill("owner password 2");
  await owner.getByRole("button", { name: "Change password" }).click();
  await owner.waitForURL(/notice=password/);
  t.match(await owner.locator(".notice").innerText(), /password was changed/);
  await owner.getByRole("button", { name: "Sign out" }).click();
  await owner.waitForURL(/\/signin$/);
  await signIn(owner, v.url, "owner@acme.example", "owner password 1");
  t.match(await owner.locator("main").innerText(), /not right/, "the old password no longer works");
  await signIn(owner, v.url, "owner@acme.example", "owner password 2");
  t.match(owner.url(), /\/connections$/, "the new password works");

  // --- organizations
  await owner.goto(`${v.url}/organizations`);
  await axe(t, owner, "organizations (none yet)");
  await owner.getByLabel("Name").fill("Acme Ops");
  await owner.getByRole("button", { name: "Create organization" }).click();
  await owner.waitForURL(/\/organizations\/[^/?]+\?notice=created$/);
  const orgUrl = owner.url().split("?")[0] as string;
  const orgId = orgUrl.split("/").pop() as string;
  t.match(await owner.locator("h1").innerText(), /Acme Ops/);
  await owner.goto(`${v.url}/organizations`);
  t.match(
    await owner.locator("table").innerText(),
    /Acme Ops\s+owner\s+1/,
    "listed with my role and the member count",
  );
  await axe(t, owner, "organizations list");

  // invite a new person (admin) and an existing... first a new one
  await owner.goto(orgUrl);
  await owner.getByLabel("Email to invite").fill("new.admin@acme.example");
  await owner.getByLabel("Role", { exact: true }).selectOption("admin");
  await owner.getByRole("button", { name: "Send invitation" }).click();
  await owner.waitForURL(/notice=invited/);
  t.match(await owner.locator("main").innerText(), /new\.admin@acme\.example/, "the invitation is listed");
  await axe(t, owner, "organization page");
  const link = await smtp.linkTo("new.admin@acme.example");
  t.ok(link.startsWith(`${v.url}/invitations/`), "the e-mail carries the link");
  const stored = await sql.query("SELECT row_to_json(x)::text AS j FROM (SELECT * FROM invitations) x");
  const outbox = await sql.query("SELECT body FROM notifications");
  const token = link.split("/").pop() as string;
  t.notOk(JSON.stringify([stored.rows, outbox.rows]).includes(token), "the token is nowhere in the database");
  const alerts = await ownerCtx.request.get(`${v.url}/v1/alerts`, { failOnStatusCode: false });
  t.notOk((await alerts.text()).includes(token), "nor in the alert history");

  // accept in a second browser as a new user
  const { page: invitee, context: inviteeCtx } = await newPage(t, b);
  await invitee.goto(link);
  t.match(
    await invitee.locator("main").innerText(),
    /Acme Ops[\s\S]*admin/,
    "shows the organization and the role",
  );
  await axe(t, invitee, "invitation (new account)");
  await invitee.getByLabel("Password", { exact: true }).fill("invitee pass 1");
  await invitee.getByLabel("Confirm password").fill("invitee pass 1");
  await invitee.getByRole("button", { name: /create my account and join/i }).click();
  await invitee.waitForURL(/\/organizations\/[^/?]+\?notice=joined$/);
  t.match(await invitee.locator("main").innerText(), /You are admin/, "joined as admin, signed in");

  // reused link: 410 in a third browser
  const { page: third } = await newPage(t, b);
  const reused = await third.goto(link);
  t.equal(reused?.status(), 410, "a used link: 410 Gone");
  t.match(await third.locator("main").innerText(), /already used/);
  await axe(t, third, "invitation already used");

  // the owner changes the new admin to member
  await owner.goto(orgUrl);
  await owner.getByLabel("Role of new.admin@acme.example").selectOption("member");
  await owner.getByRole("button", { name: "Change role of new.admin@acme.example" }).click();
  await owner.waitForURL(/notice=role/);
  t.match(await owner.locator("table").first().innerText(), /new\.admin@acme\.example\s+member/);
  await shot(owner, "organizations");

  // a member trying admin actions: 403, nothing changed
  await invitee.goto(orgUrl);
  t.equal(
    await invitee.getByRole("button", { name: "Send invitation" }).count(),
    0,
    "a member sees no admin forms",
  );
  const csrf = await csrfOf(invitee);
  const rename = await post(inviteeCtx, `${orgUrl}/name`, { _csrf: csrf, name: "Hijacked" });
  t.equal(rename.status, 403, "a member cannot rename");
  t.match(rename.text, /only an admin or owner/);
  const ownerRow = await sql.query(
    "SELECT user_id FROM memberships WHERE role = 'owner' AND organization_id = $1",
    [orgId],
  );
  const demote = await post(inviteeCtx, `${orgUrl}/members/${ownerRow.rows[0]?.user_id}/role`, {
    _csrf: csrf,
    role: "member",
  });
  t.equal(demote.status, 403, "a member cannot change roles");
  const invite = await post(inviteeCtx, `${orgUrl}/invitations`, {
    _csrf: csrf,
    email: "x@y.example",
    role: "admin",
  });
  t.equal(invite.status, 403, "a member cannot invite");
  const org = await sql.query("SELECT name FROM organizations WHERE id = $1", [orgId]);
  t.equal(org.rows[0]?.name, "Acme Ops", "the name did not change");
  t.equal((await sql.query("SELECT count(*)::int AS n FROM memberships WHERE role = 'owner'")).rows[0]?.n, 1);
  t.equal(
    (await sql.query("SELECT count(*)::int AS n FROM invitations")).rows[0]?.n,
    1,
    "no invitation was made",
  );

  // missing CSRF token: 403, nothing changed
  const noCsrf = await post(ownerCtx, `${orgUrl}/name`, { name: "No token" });
  t.equal(noCsrf.status, 403, "no CSRF token: 403");
  t.match(noCsrf.text, /form expired or came from another site/);
  t.equal(
    (await sql.query("SELECT name FROM organizations WHERE id = $1", [orgId])).rows[0]?.name,
    "Acme Ops",
  );

  // the last owner cannot leave: 409 with a clear message
  await owner.goto(orgUrl);
  owner.once("dialog", (d) => void d.accept());
  const [leave] = await Promise.all([
    owner.waitForResponse((r) => r.url().endsWith("/leave")),
    owner.getByRole("button", { name: "Leave Acme Ops" }).click(),
  ]);
  t.equal(leave.status(), 409, "the last owner cannot leave");
  t.match(await owner.locator("#page-error").innerText(), /last owner/);
  await axe(t, owner, "organization page with an error");

  // another tenant's organization: 404, and its forms too
  const { page: stranger, context: strangerCtx } = await newPage(t, b);
  await v.admin("create-user", "--email", "stranger@other.example", "--password", "stranger pass");
  await signIn(stranger, v.url, "stranger@other.example", "stranger pass");
  const notMine = await stranger.goto(orgUrl);
  t.equal(notMine?.status(), 404, "another tenant's organization: 404");
  await axe(t, stranger, "404 page");
  await stranger.goto(`${v.url}/organizations`);
  const strangerCsrf = await csrfOf(stranger);
  const strangerRename = await post(strangerCtx, `${orgUrl}/name`, { _csrf: strangerCsrf, name: "Mine now" });
  t.equal(strangerRename.status, 404, "posting to it: 404");
  t.equal(
    (await sql.query("SELECT name FROM organizations WHERE id = $1", [orgId])).rows[0]?.name,
    "Acme Ops",
  );

  // an expired invitation: 410 with "ask for a new one"
  await owner.goto(orgUrl);
  await owner.getByLabel("Email to invite").fill("late@acme.example");
  await owner.getByRole("button", { name: "Send invitation" }).click();
  await owner.waitForURL(/notice=invited/);
  const late = await smtp.linkTo("late@acme.example");
  await sql.query(
    "UPDATE invitations SET expires_at = now() - interval '1 minute' WHERE email = 'late@acme.example'",
  );
  const expired = await stranger.goto(late);
  t.equal(expired?.status(), 410, "an expired link: 410");
  t.match(await stranger.locator("main").innerText(), /expired[\s\S]*Ask for a new one/);

  // a signed-in user with another e-mail may accept (the link is the proof); revoke works
  await owner.goto(orgUrl);
  await owner.getByLabel("Email to invite").fill("someone@acme.example");
  await owner.getByRole("button", { name: "Send invitation" }).click();
  await owner.waitForURL(/notice=invited/);
  const forSomeone = await smtp.linkTo("someone@acme.example");
  await stranger.goto(forSomeone);
  t.match(
    await stranger.locator("main").innerText(),
    /stranger@other\.example joins/,
    "says whose account joins",
  );
  await axe(t, stranger, "invitation (signed in)");
  await stranger.getByRole("button", { name: "Join as stranger@other.example" }).click();
  await stranger.waitForURL(/notice=joined/);
  t.equal(
    (
      await sql.query(
        "SELECT role FROM memberships m JOIN users u ON u.id = m.user_id WHERE u.email = 'stranger@other.example'",
      )
    ).rows[0]?.role,
    "member",
  );

  // dark mode and a phone's width: still axe-clean, nothing wider than the screen but the tables' own scroll
  const { page: phone } = await newPage(t, b, { viewport: { width: 390, height: 844 }, colorScheme: "dark" });
  await signIn(phone, v.url, "owner@acme.example", "owner password 2");
  for (const path of ["/organizations", orgUrl.replace(v.url, ""), "/profile"]) {
    await phone.goto(`${v.url}${path}`);
    await axe(t, phone, `${path} in dark mode at 390 px`);
    const overflow = await phone.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    t.ok(overflow <= 0, `${path}: no sideways scrolling at 390 px (${overflow})`);
  }

  // audits of the changes are in the alert history
  const history = await sql.query<{ body: string }>(
    "SELECT body FROM notifications WHERE kind = 'audit' AND organization_id = $1",
    [orgId],
  );
  const bodies = history.rows.map((r) => r.body).join("\n");
  t.match(bodies, /new\.admin@acme\.example joined the organization "Acme Ops" as admin/);
  t.match(bodies, /new\.admin@acme\.example is now member .*was admin/);
});
