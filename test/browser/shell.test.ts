import t from "tap";
import { axe, browser, newPage, requireChromium, signIn, vigil } from "./harness.js";

/**
 * The dashboard's shell in a real browser: with no user yet every page goes to the first-run
 * page; signed out, a page goes to /signin and comes back after it; the security headers and the
 * strict Content-Security-Policy are on every page, and the shell (navigation, sign-out) is
 * keyboard-usable and axe-clean.
 */
t.test("signed out: /signin and back; headers; sign out", async (t) => {
  if (!requireChromium(t)) return;
  const v = await vigil(t);
  const user = await v.admin(
    "create-user",
    "--email",
    "owner@shell.example",
    "--password",
    "correct horse 1",
  );
  t.ok(user.id);
  const b = await browser(t);
  const { page } = await newPage(t, b);

  const first = await page.goto(`${v.url}/connections`);
  t.match(page.url(), /\/signin\?return_to=%2Fconnections$/, "a page without a session goes to /signin");
  t.equal(first?.status(), 200);

  await signIn(page, v.url, "owner@shell.example", "correct horse 1");
  const res = await page.goto(`${v.url}/`);
  t.match(page.url(), /\/connections$/, "/ is the connections list");
  const h = res?.headers() ?? {};
  t.match(h["content-security-policy"], /script-src 'self'/);
  t.notMatch(h["content-security-policy"], /unsafe-inline/, "no inline script or style allowed");
  t.match(h["content-security-policy"], /frame-ancestors 'none'/);
  t.equal(h["x-content-type-options"], "nosniff");
  t.equal(h["referrer-policy"], "no-referrer");
  const cookies = await page.context().cookies();
  const session = cookies.find((c) => c.name === "vigil_session");
  t.ok(session?.httpOnly, "the session cookie is HttpOnly");
  t.equal(session?.sameSite, "Lax");
  t.equal(session?.secure, false, "not Secure on http loopback");
  await axe(t, page, "connections page shell");

  // keyboard: the skip link comes first and leads to the main content
  await page.keyboard.press("Tab");
  t.equal(await page.evaluate(() => document.activeElement?.textContent), "Skip to content");

  await page.getByRole("button", { name: "Sign out" }).click();
  await page.waitForURL(/\/signin$/);
  await page.goto(`${v.url}/connections`);
  t.match(page.url(), /\/signin/, "signed out: back to /signin");
});
