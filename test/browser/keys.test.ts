import type { Page } from "playwright-core";
import t from "tap";
import { axe, browser, newPage, requireChromium, shot, signIn, vigil } from "./harness.js";

/**
 * Profile → API keys in a real browser against a real `vigil serve`: a key is created, shown
 * once with a copy button, works against the REST API, shows its last use, and stops working
 * once revoked (after the confirmation); organization keys follow the CLI's rule (admin or
 * owner); a resent form, a missing CSRF token, a forged organization and another user's key id
 * change nothing.
 */

const OWNER = { email: "owner@keys.example", password: "owner password 1" };
const MEMBER = { email: "member@keys.example", password: "member password 1" };

/** The CSRF token and one-time form id of the create form on the page. */
async function createFormTokens(page: Page) {
  return {
    _csrf: await page.locator('form[action="/profile/keys"] input[name=_csrf]').inputValue(),
    form_id: await page.locator("input[name=form_id]").inputValue(),
  };
}

t.test("API keys: create, show once, use, last use, revoke; the rules hold", async (t) => {
  if (!requireChromium(t)) return;
  const v = await vigil(t);
  const owner = await v.admin(
    "create-user",
    "--email",
    OWNER.email,
    "--password",
    OWNER.password,
    "--plan",
    "enterprise",
  );
  const member = await v.admin(
    "create-user",
    "--email",
    MEMBER.email,
    "--password",
    MEMBER.password,
    "--plan",
    "enterprise",
  );
  const org = await v.admin(
    "create-org",
    "--name",
    "Acme Ops",
    "--owner",
    String(owner.id),
    "--plan",
    "enterprise",
  );
  await v.admin("add-member", "--org", String(org.id), "--user", String(member.id), "--role", "member");
  const api = (key: string) =>
    fetch(`${v.url}/v1/connections`, { headers: { authorization: `Bearer ${key}` } }).then((r) => r.status);

  const b = await browser(t);
  const { page } = await newPage(t, b);
  await signIn(page, v.url, OWNER.email, OWNER.password);

  const empty = await page.goto(`${v.url}/profile/keys`);
  if (empty?.status() !== 200) t.comment(v.output().slice(-4000));
  t.equal(empty?.status(), 200);
  t.equal(await page.getByRole("heading", { level: 1 }).textContent(), "API keys");
  await axe(t, page, "API keys, no key yet");

  // bad input: messages next to the fields, nothing created
  await page.getByLabel("Name", { exact: true }).fill("");
  await page.getByLabel("connections:read").uncheck();
  const noName = await Promise.all([
    page.waitForNavigation(),
    page.getByRole("button", { name: "Create key" }).click(),
  ]).then(([r]) => r);
  t.equal(noName?.status(), 400, "an empty name is a 400");
  t.match(await page.locator("#key-name-error").textContent(), /must not be empty/);
  t.equal(await page.getByLabel("Name", { exact: true }).getAttribute("aria-invalid"), "true");
  t.match(await page.getByLabel("Name", { exact: true }).getAttribute("aria-describedby"), /key-name-error/);
  await page.getByLabel("Name", { exact: true }).fill("CI deploy");
  const noPerm = await Promise.all([
    page.waitForNavigation(),
    page.getByRole("button", { name: "Create key" }).click(),
  ]).then(([r]) => r);
  t.equal(noPerm?.status(), 400, "no permission is a 400");
  t.match(await page.locator("#key-perms-error").textContent(), /at least one permission/);
  t.equal(await page.getByLabel("Name", { exact: true }).inputValue(), "CI deploy", "the values are kept");
  await axe(t, page, "API keys form with errors");

  // a personal key: shown once, copyable, never in the URL
  await page.getByLabel("connections:read").check();
  await page.getByLabel("usage:read").check();
  const made = await Promise.all([
    page.waitForNavigation(),
    page.getByRole("button", { name: "Create key" }).click(),
  ]).then(([r]) => r);
  t.equal(made?.status(), 201);
  t.equal(made?.headers()["cache-control"], "no-store", "the page with the key is not stored");
  const key = ((await page.locator("#new-key.secret").textContent()) ?? "").trim();
  t.match(key, /^vgl_[A-Za-z0-9_-]{32}$/, "the key is shown");
  t.equal(page.url(), `${v.url}/profile/keys`, "the key is in no URL");
  t.match(await page.locator("main").textContent(), /will not be shown again/);
  t.match(await page.locator("main").textContent(), /Authorization: Bearer …/);
  await page.getByRole("button", { name: "Copy key" }).click();
  t.equal(await page.evaluate(() => navigator.clipboard.readText()), key, "the copy button copies the key");
  await axe(t, page, "new key page");

  t.equal(await api(key), 200, "the key works against the REST API");

  await page.goto(`${v.url}/profile/keys`);
  t.notMatch(await page.content(), key, "the list does not show the key again");
  await page.reload();
  t.notMatch(await page.content(), key, "nor after a reload");
  const row = page.locator("tr", { hasText: "CI deploy" });
  t.match(await row.textContent(), /Personal/);
  t.match(await row.textContent(), /usage:read/);
  t.match(await row.textContent(), key.slice(0, 12), "the key's first characters tell it apart");
  t.equal(await row.locator(".last-used time").count(), 1, "last use is shown after the key was used");
  const usedAt = Date.parse((await row.locator(".last-used time").getAttribute("datetime")) ?? "");
  t.ok(Math.abs(Date.now() - usedAt) < 120_000, "and it is recent");

  // the same form sent twice (a reload of the answer) makes one key, and says so
  const tokens = await createFormTokens(page);
  const form = { ...tokens, name: "sent twice", permissions: "usage:read", organization_id: "" };
  const first = await page.request.post(`${v.url}/profile/keys`, { form, maxRedirects: 0 });
  t.equal(first.status(), 201);
  const second = await page.request.post(`${v.url}/profile/keys`, { form, maxRedirects: 0 });
  t.equal(second.status(), 409, "a resent form creates nothing");
  t.match(await second.text(), /already sent/);
  t.notMatch(await second.text(), /vgl_[A-Za-z0-9_-]{32}/, "and shows no key");
  // an oversized name is refused with its message
  const big = await page.request.post(`${v.url}/profile/keys`, {
    form: { _csrf: tokens._csrf, name: "x".repeat(5000), permissions: "usage:read" },
  });
  t.equal(big.status(), 400);
  t.match(await big.text(), /id="key-name-error">must be at most 100 characters/);
  // no CSRF token: 403, nothing created
  const noCsrf = await page.request.post(`${v.url}/profile/keys`, {
    form: { name: "no csrf", permissions: "usage:read" },
  });
  t.equal(noCsrf.status(), 403, "a form without its CSRF token is refused");
  await page.goto(`${v.url}/profile/keys`);
  t.equal(await page.locator("tr", { hasText: "sent twice" }).count(), 1, "one key from the resent form");
  t.equal(await page.locator("tr", { hasText: "no csrf" }).count(), 0);
  t.equal(await page.locator("tr", { hasText: "xxxxxxxx" }).count(), 0);

  // an organization key, as its owner
  t.equal(
    await page.locator("#key-org option", { hasText: "Acme Ops" }).count(),
    1,
    "the owner may pick the organization",
  );
  await page.getByLabel("Name", { exact: true }).fill("Acme reader");
  await page
    .getByLabel("For", { exact: true })
    .selectOption({ label: "Organization: Acme Ops (you are owner)" });
  await Promise.all([page.waitForNavigation(), page.getByRole("button", { name: "Create key" }).click()]);
  const orgKey = ((await page.locator("#new-key").textContent()) ?? "").trim();
  t.match(await page.locator("main").textContent(), /key of the organization Acme Ops/);
  t.equal(await api(orgKey), 200, "the organization key works");
  await page.goto(`${v.url}/profile/keys`);
  t.match(await page.locator("tr", { hasText: "Acme reader" }).textContent(), /Organization\s*Acme Ops/);
  await shot(page, "api-keys");
  const ownerKeyAction = await page
    .locator("tr", { hasText: "CI deploy" })
    .locator("form")
    .getAttribute("action");
  t.match(ownerKeyAction, /^\/profile\/keys\/[0-9a-f-]{36}\/revoke$/);

  // a member: the organization is not offered, a forged post is a 403, another user's key a 404
  const { page: mp } = await newPage(t, b, { colorScheme: "dark" });
  await signIn(mp, v.url, MEMBER.email, MEMBER.password);
  await mp.goto(`${v.url}/profile/keys`);
  t.equal(
    await mp.locator("#key-org option", { hasText: "Acme Ops" }).count(),
    0,
    "a member is not offered it",
  );
  t.match(await mp.locator("#key-org-hint").textContent(), /no organization/);
  await axe(t, mp, "API keys (dark)");
  const mTokens = await createFormTokens(mp);
  const forged = await mp.request.post(`${v.url}/profile/keys`, {
    form: { ...mTokens, name: "forged", permissions: "connections:read", organization_id: String(org.id) },
  });
  t.equal(forged.status(), 403, "a member cannot make an organization key");
  t.match(await forged.text(), /id="key-org-error">Organization keys need the admin or owner role/);
  t.notMatch(await forged.text(), /vgl_[A-Za-z0-9_-]{32}/);
  const steal = await mp.request.post(`${v.url}${ownerKeyAction}`, {
    form: { _csrf: mTokens._csrf },
    maxRedirects: 0,
  });
  t.equal(steal.status(), 404, "another user's key id is not found");
  t.equal(await api(key), 200, "and the key still works");
  await mp.goto(`${v.url}/profile/keys`);
  t.match(
    await mp.locator("main").textContent(),
    /You have no active key yet/,
    "nothing was created for the member",
  );

  // revoke: without CSRF refused; dismissing the confirmation changes nothing; accepting revokes
  const revokeNoCsrf = await page.request.post(`${v.url}${ownerKeyAction}`, {
    form: { x: "1" },
    maxRedirects: 0,
  });
  t.equal(revokeNoCsrf.status(), 403);
  t.equal(await api(key), 200);
  page.once("dialog", (d) => void d.dismiss());
  await page.getByRole("button", { name: "Revoke CI deploy" }).click();
  await page.waitForTimeout(300);
  t.equal(page.url(), `${v.url}/profile/keys`, "dismissed: nothing sent");
  t.equal(await api(key), 200);
  let asked = "";
  page.once("dialog", (d) => {
    asked = d.message();
    void d.accept();
  });
  await Promise.all([
    page.waitForURL(/notice=revoked/),
    page.getByRole("button", { name: "Revoke CI deploy" }).click(),
  ]);
  t.match(asked, /Revoke the key “CI deploy”/, "the confirmation names the key");
  t.match(await page.locator(".notice").textContent(), /revoked/);
  t.equal(await api(key), 401, "the revoked key gets 401 at once");
  t.equal(await api(orgKey), 200, "the other keys still work");
  const revokedRow = page.locator("table[aria-labelledby=revoked-keys] tr", { hasText: "CI deploy" });
  t.match(await revokedRow.textContent(), /revoked/, "listed as revoked, with when");
  t.equal(await page.locator("table[aria-labelledby=active-keys] tr", { hasText: "CI deploy" }).count(), 0);
  await axe(t, page, "API keys with a revoked key");

  // phone width: the table scrolls inside its frame, the page does not
  await page.setViewportSize({ width: 390, height: 800 });
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  t.ok(overflow <= 1, "no sideways scroll of the page at 390 px");
  await axe(t, page, "API keys at 390 px");
});
