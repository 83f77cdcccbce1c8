import type { Page } from "playwright-core";
import t from "tap";
import { axe, browser, newPage, requireChromium, signIn, vigil } from "./harness.js";

/**
 * Maintenance windows in a real browser against a real `vigil serve`: a one-off window over a
 * connection is added and listed as active now, a recurring one with its next occurrence; a bad
 * RRULE is the API's message next to the field and stores nothing; a window is deleted after the
 * confirmation.
 */

const OWNER = { email: "owner@maintenance.example", password: "owner password 1" };

async function press(page: Page, name: string) {
  const [r] = await Promise.all([
    page.waitForNavigation(),
    page.getByRole("button", { name, exact: true }).click(),
  ]);
  return r;
}

/** A UTC instant as a datetime-local value. */
const wall = (ms: number) => new Date(ms).toISOString().slice(0, 16);

t.test("maintenance: add one-off and recurring windows, a bad rule, delete", async (t) => {
  if (!requireChromium(t)) return;
  const v = await vigil(t);
  await v.admin("create-user", "--email", OWNER.email, "--password", OWNER.password, "--plan", "enterprise");
  const b = await browser(t);
  const { page } = await newPage(t, b);
  await signIn(page, v.url, OWNER.email, OWNER.password);

  // a connection to cover: a gateway (no checks to run)
  await page.goto(`${v.url}/connections/new?kind=gateway`);
  await page.getByLabel("Name").fill("edge gateway");
  await press(page, "Add connection");

  await page.goto(`${v.url}/connections`);
  await Promise.all([
    page.waitForURL(/\/maintenance$/),
    page.getByRole("link", { name: "Maintenance", exact: true }).click(),
  ]);
  t.equal(await page.getByRole("heading", { level: 1 }).textContent(), "Maintenance");
  t.equal(
    await page.getByRole("link", { name: "Maintenance", exact: true }).getAttribute("aria-current"),
    "page",
  );
  t.match(await page.locator("#windows-empty").textContent(), /No maintenance window/);
  // with the script, only the chosen schedule's fields show
  t.ok(await page.getByLabel("Starts", { exact: true }).isVisible(), "one-off fields show");
  t.notOk(await page.getByLabel("Rule (RRULE)", { exact: true }).isVisible(), "recurring ones do not");
  await axe(t, page, "maintenance, none yet");

  // a bad rule: the API's message next to the field, nothing stored
  await page.getByLabel("edge gateway").check();
  await page.getByLabel("Recurring: a rule (RRULE) and a duration").check();
  t.ok(
    await page.getByLabel("Rule (RRULE)", { exact: true }).isVisible(),
    "choosing recurring shows its fields",
  );
  await page.getByLabel("Rule (RRULE)", { exact: true }).fill("FREQ=SOMETIMES;BYHOUR=2");
  await page.getByLabel("Duration (minutes)").fill("60");
  const bad = await press(page, "Add window");
  t.equal(bad?.status(), 400, "a bad rule is a 400");
  t.match(await page.locator("#mw-rrule-error").textContent(), /FREQ/);
  t.equal(await page.getByLabel("Rule (RRULE)", { exact: true }).getAttribute("aria-invalid"), "true");
  t.match(
    await page.getByLabel("Rule (RRULE)", { exact: true }).getAttribute("aria-describedby"),
    /mw-rrule-error/,
  );
  t.equal(
    await page.getByLabel("Rule (RRULE)", { exact: true }).inputValue(),
    "FREQ=SOMETIMES;BYHOUR=2",
    "the values are kept",
  );
  t.equal(await page.getByLabel("edge gateway").isChecked(), true);
  t.match(await page.locator("#windows-empty").textContent(), /No maintenance window/, "nothing was stored");
  await axe(t, page, "maintenance form with an error");

  // a one-off window over the connection, under way now
  await page.getByLabel("One-off: a start and an end").check();
  await page.getByLabel("Time zone").fill("UTC");
  await page.getByLabel("Starts", { exact: true }).fill(wall(Date.now() - 10 * 60_000));
  await page.getByLabel("Ends", { exact: true }).fill(wall(Date.now() + 60 * 60_000));
  await press(page, "Add window");
  t.match(page.url(), /\/maintenance\?notice=created$/);
  t.match(await page.locator(".notice").textContent(), /window was added/);
  const row = page.locator("#windows-table tbody tr");
  t.equal(await row.count(), 1);
  t.match(await row.textContent(), /edge gateway/);
  t.match(await row.textContent(), /One-off/);
  t.match(await row.locator(".status").textContent(), /active now/, "listed as active");

  // a recurring one: its rule, duration, zone and next occurrence
  await page.getByLabel("edge gateway").check();
  await page.getByLabel("Recurring: a rule (RRULE) and a duration").check();
  await page.getByLabel("Time zone").fill("Europe/Paris");
  await page.getByLabel("Rule (RRULE)", { exact: true }).fill("FREQ=WEEKLY;BYDAY=SU;BYHOUR=2;BYMINUTE=0");
  await page.getByLabel("Duration (minutes)").fill("120");
  await press(page, "Add window");
  t.match(page.url(), /notice=created$/);
  const rec = page.locator("#windows-table tbody tr", { hasText: "Recurring" });
  t.match(await rec.textContent(), /FREQ=WEEKLY;BYDAY=SU;BYHOUR=2;BYMINUTE=0/);
  t.match(await rec.textContent(), /120 min each, in Europe\/Paris/);
  t.match(await rec.locator(".status").textContent(), /scheduled\s*next|active now/);
  await axe(t, page, "maintenance with windows");

  // delete the one-off window, after the confirmation
  let asked = "";
  page.once("dialog", (d) => {
    asked = d.message();
    void d.accept();
  });
  await press(page, "Delete window 1");
  t.match(asked, /Delete this maintenance window\?/);
  t.match(page.url(), /notice=deleted$/);
  t.equal(await page.locator("#windows-table tbody tr", { hasText: "One-off" }).count(), 0, "deleted");
  t.equal(
    await page.locator("#windows-table tbody tr", { hasText: "Recurring" }).count(),
    1,
    "the other kept",
  );

  // dark, and a phone
  const { page: dark } = await newPage(t, b, { colorScheme: "dark", viewport: { width: 390, height: 800 } });
  await signIn(dark, v.url, OWNER.email, OWNER.password);
  await dark.goto(`${v.url}/maintenance`);
  const overflow = await dark.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  t.ok(overflow <= 1, "no sideways scroll of the page at 390 px");
  await axe(t, dark, "maintenance (dark, 390 px)");
});
