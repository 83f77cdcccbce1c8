import http from "node:http";
import type { AddressInfo } from "node:net";
import type { Page } from "playwright-core";
import t, { type Test } from "tap";
import { axe, browser, newPage, requireChromium, signIn, vigil } from "./harness.js";

/**
 * Channels in a real browser against a real `vigil serve` (plain http to loopback allowed, as a
 * developer's machine): a Slack channel pointing at a local receiver is added, listed with its
 * hint and never its secret, tested (the receiver gets a Block Kit message, the page says so),
 * renamed with its secret left empty (still works), refused by its provider (the message next to
 * the setting), routed, and deleted after the confirmation. A malformed PagerDuty routing key is
 * the API's message next to the field and stores nothing; a webhook channel's signing secret is
 * shown once; an organization's channels are its admins' and owners' only.
 */

const OWNER = { email: "owner@channels.example", password: "owner password 1" };
const MEMBER = { email: "member@channels.example", password: "member password 1" };

interface Received {
  path: string;
  body: string;
}

/** A local receiver: 200 `ok` like Slack, 404 `no_service` on paths ending in /gone. */
async function receiver(t: Test): Promise<{ base: string; got: Received[] }> {
  const got: Received[] = [];
  const server = http.createServer((req, res) => {
    let body = "";
    req.on("data", (c: Buffer) => (body += c.toString("utf8")));
    req.on("end", () => {
      got.push({ path: req.url ?? "", body });
      if ((req.url ?? "").endsWith("/gone")) res.writeHead(404).end("no_service");
      else res.writeHead(200, { "content-type": "text/plain" }).end("ok");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, got };
}

/** Submits the form a button is in and answers the navigation's response. */
async function press(page: Page, name: string | RegExp) {
  const [r] = await Promise.all([
    page.waitForNavigation(),
    page.getByRole("button", { name, exact: true }).click(),
  ]);
  return r;
}

t.test("channels: add, list without the secret, test, edit keeping the secret, route, delete", async (t) => {
  if (!requireChromium(t)) return;
  const rx = await receiver(t);
  const v = await vigil(t, { WEBHOOK_ALLOW_HTTP_LOOPBACK: "true" });
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

  const b = await browser(t);
  const { page } = await newPage(t, b);
  await signIn(page, v.url, OWNER.email, OWNER.password);

  // the navigation leads to the page
  await page.goto(`${v.url}/connections`);
  await Promise.all([
    page.waitForURL(/\/channels$/),
    page.getByRole("link", { name: "Channels", exact: true }).click(),
  ]);
  t.equal(await page.getByRole("heading", { level: 1 }).textContent(), "Channels");
  t.equal(
    await page.getByRole("link", { name: "Channels", exact: true }).getAttribute("aria-current"),
    "page",
  );
  t.match(await page.locator("#channels-empty").textContent(), /No channel yet/);
  // without the script every type's settings show, each under its heading
  const plain = await (await page.request.get(`${v.url}/channels`)).text();
  t.notMatch(plain, /<fieldset[^>]*\bhidden/, "the page as sent hides no type's settings");
  t.match(plain, /<legend>PagerDuty settings<\/legend>/);
  // with the script, only the chosen type's settings show
  t.ok(await page.locator("#ch-slack-webhook_url").isVisible(), "Slack's settings show");
  t.notOk(await page.locator("#ch-pagerduty-routing_key").isVisible(), "PagerDuty's do not");
  await page.getByLabel("Type").selectOption("pagerduty");
  t.ok(await page.locator("#ch-pagerduty-routing_key").isVisible(), "choosing PagerDuty shows its settings");
  t.notOk(await page.locator("#ch-slack-webhook_url").isVisible());
  await axe(t, page, "channels, none yet");

  // a malformed routing key: the API's message next to the field, nothing stored, the key not echoed
  const badKey = "not-a-routing-key-123";
  await page.getByLabel("Name", { exact: true }).fill("pager");
  await page.locator("#ch-pagerduty-routing_key").fill(badKey);
  const bad = await press(page, "Add channel");
  t.equal(bad?.status(), 400, "a bad routing key is a 400");
  t.match(
    await page.locator("#ch-pagerduty-routing_key-error").textContent(),
    /32-character integration key/,
  );
  t.equal(await page.locator("#ch-pagerduty-routing_key").getAttribute("aria-invalid"), "true");
  t.match(
    await page.locator("#ch-pagerduty-routing_key").getAttribute("aria-describedby"),
    /ch-pagerduty-routing_key-error/,
  );
  t.equal(await page.getByLabel("Type").inputValue(), "pagerduty", "the chosen type is kept");
  t.equal(await page.getByLabel("Name", { exact: true }).inputValue(), "pager", "and the name");
  t.notMatch(await page.content(), badKey, "a secret setting is never sent back");
  t.match(await page.locator("#channels-empty").textContent(), /No channel yet/, "nothing was stored");
  await axe(t, page, "channels form with an error");

  // a Slack channel at the local receiver
  const secretPath = "/services/T0000/B0000/s3cretPathXYZa1b2";
  const slackUrl = `${rx.base}${secretPath}`;
  await page.getByLabel("Type").selectOption("slack");
  await page.getByLabel("Name", { exact: true }).fill("#ops");
  await page.locator("#ch-slack-webhook_url").fill(slackUrl);
  await press(page, "Add channel");
  t.match(page.url(), /\/channels\?notice=created$/);
  t.match(await page.locator(".notice").textContent(), /channel was added/);
  const row = page.locator("#channels-table tr", { hasText: "#ops" });
  t.match(await row.textContent(), /Slack/);
  t.match(
    await row.locator("code.hint-value").textContent(),
    /^127\.0\.0\.1:\d+\/…a1b2$/,
    "listed with its hint",
  );
  t.notMatch(await page.content(), "s3cretPathXYZ", "the webhook URL is nowhere in the page");
  await axe(t, page, "channels with a Slack channel");

  // Test: the receiver gets a Block Kit message, the page says it was accepted
  await press(page, "Test #ops");
  t.match(await page.locator("#test-result h2").textContent(), /Test of “#ops”: sent/);
  t.match(await page.locator("#test-result").textContent(), /HTTP 200, answered ok/);
  t.equal(rx.got.length, 1, "the receiver got one request");
  t.equal(rx.got[0]?.path, secretPath);
  const msg = JSON.parse(rx.got[0]?.body ?? "{}") as { text?: string; blocks?: { type: string }[] };
  t.equal(msg.blocks?.[0]?.type, "header", "a Block Kit message: a header block");
  t.ok(
    msg.blocks?.some((bl) => bl.type === "section"),
    "and a section",
  );
  t.match(msg.text, /Test of channel #ops/);
  t.notMatch(await page.content(), "s3cretPathXYZ");
  await axe(t, page, "channels after a test");

  // edit: a new name, the secret left empty is kept
  await Promise.all([page.waitForURL(/\/edit$/), page.getByRole("link", { name: "Edit #ops" }).click()]);
  t.equal(await page.getByRole("heading", { level: 1 }).textContent(), "Edit #ops");
  t.match(await page.locator("main").textContent(), /leave a secret field empty to keep the stored one/);
  t.equal(await page.locator("#ch-webhook_url").inputValue(), "", "the stored secret is not in the form");
  t.match(await page.locator("#ch-webhook_url-hint").textContent(), /Leave this empty to keep it/);
  t.notMatch(await page.content(), "s3cretPathXYZ");
  await axe(t, page, "edit a channel");
  await page.getByLabel("Name", { exact: true }).fill("#ops-alerts");
  await press(page, "Save changes");
  t.match(page.url(), /notice=updated/);
  const renamed = page.locator("#channels-table tr", { hasText: "#ops-alerts" });
  t.match(await renamed.locator("code.hint-value").textContent(), /…a1b2$/, "the same webhook");
  await press(page, "Test #ops-alerts");
  t.match(await page.locator("#test-result h2").textContent(), /sent/, "the kept secret still works");
  t.equal(rx.got.length, 2);
  t.equal(rx.got[1]?.path, secretPath);

  // a webhook the provider refuses: the message next to the setting
  await page.getByLabel("Type").selectOption("slack");
  await page.getByLabel("Name", { exact: true }).fill("#gone");
  await page.locator("#ch-slack-webhook_url").fill(`${rx.base}/services/T0000/B0000/gone`);
  await press(page, "Add channel");
  const refused = await press(page, "Test #gone");
  t.equal(refused?.status(), 400, "a refused webhook is a 400");
  t.match(await page.locator("#channel-form-error").textContent(), /test send was refused/);
  t.match(await page.locator("#ch-webhook_url-error").textContent(), /slack refused it/);
  t.equal(await page.locator("#ch-webhook_url").getAttribute("aria-invalid"), "true");
  await axe(t, page, "a refused test send");

  // routing: a rule naming the channel, which then cannot be deleted
  await page.goto(`${v.url}/channels`);
  await page.locator("#add-rule").getByLabel("#ops-alerts").first().check();
  await page.locator("#add-rule").getByLabel("Failures (availability incidents)").check();
  await page.getByLabel("Repeat every (minutes, optional)").fill("30");
  const noEsc = await press(page, "Add rule");
  t.equal(noEsc?.status(), 400, "a repeat without an escalation is a 400");
  t.match(await page.locator("#rule-repeat-error").textContent(), /needs escalate_after_minutes/);
  t.equal(await page.locator("#add-rule").getByLabel("#ops-alerts").first().isChecked(), true, "values kept");
  await page.getByLabel("Repeat every (minutes, optional)").fill("");
  await press(page, "Add rule");
  t.match(page.url(), /notice=rule_created/);
  const rule = page.locator("#rules-table tbody tr");
  t.equal(await rule.count(), 1);
  t.match(await rule.textContent(), /#ops-alerts/);
  t.match(await rule.textContent(), /failure/);
  await axe(t, page, "channels with a routing rule");
  page.once("dialog", (d) => void d.accept());
  const blocked = await press(page, "Delete #ops-alerts");
  t.equal(blocked?.status(), 409, "a channel a rule names cannot be deleted");
  t.match(await page.locator("#list-error").textContent(), /routing rule/);
  page.once("dialog", (d) => void d.accept());
  await press(page, "Delete rule 1");
  t.match(page.url(), /notice=rule_deleted/);
  t.match(await page.locator("#rules-empty").textContent(), /No routing rule/);

  // the owners' e-mail switch
  t.equal(
    await page.getByLabel("E-mail every alert to the account's owners").isChecked(),
    true,
    "on by default",
  );
  await page.getByLabel("E-mail every alert to the account's owners").uncheck();
  await press(page, "Save");
  t.match(page.url(), /notice=settings/);
  t.equal(await page.getByLabel("E-mail every alert to the account's owners").isChecked(), false);

  // a webhook channel: its signing secret once
  await page.getByLabel("Type").selectOption("webhook");
  await page.getByLabel("Name", { exact: true }).fill("receiver");
  await page.locator("#ch-webhook-url").fill(`${rx.base}/hooks/vigil`);
  const made = await press(page, "Add channel");
  t.equal(made?.status(), 201);
  t.equal(made?.headers()["cache-control"], "no-store");
  const signing = ((await page.locator("#signing-secret").textContent()) ?? "").trim();
  t.ok(signing.length >= 16, "the signing secret is shown");
  t.match(await page.locator("main").textContent(), /will not be shown again/);
  await axe(t, page, "new webhook channel");
  await page.goto(`${v.url}/channels`);
  t.notMatch(await page.content(), signing, "and not again");

  // delete, after the confirmation (dismissed first)
  page.once("dialog", (d) => void d.dismiss());
  await page.getByRole("button", { name: "Delete #ops-alerts", exact: true }).click();
  await page.waitForTimeout(300);
  t.equal(await page.locator("#channels-table tr", { hasText: "#ops-alerts" }).count(), 1, "dismissed: kept");
  let asked = "";
  page.once("dialog", (d) => {
    asked = d.message();
    void d.accept();
  });
  await press(page, "Delete #ops-alerts");
  t.match(asked, /Delete the channel “#ops-alerts”/);
  t.match(page.url(), /notice=deleted/);
  t.equal(await page.locator("#channels-table tr", { hasText: "#ops-alerts" }).count(), 0, "deleted");

  // an organization's channels: its owner switches to it; a member may not
  await Promise.all([
    page.waitForURL(/account=/),
    page.getByRole("link", { name: "Organization: Acme Ops" }).click(),
  ]);
  t.match(
    await page.locator("#channels-empty").textContent(),
    /No channel yet/,
    "the organization has its own",
  );
  await page.getByLabel("Name", { exact: true }).fill("acme slack");
  await page.locator("#ch-slack-webhook_url").fill(`${rx.base}/services/T1/B1/acmeSecret99`);
  await press(page, "Add channel");
  t.match(page.url(), new RegExp(`account=${String(org.id)}&notice=created$`));
  t.equal(await page.locator("#channels-table tr", { hasText: "acme slack" }).count(), 1);
  await page.goto(`${v.url}/channels`);
  t.equal(
    await page.locator("#channels-table tr", { hasText: "acme slack" }).count(),
    0,
    "not the personal account's",
  );

  const { page: mp } = await newPage(t, b, { colorScheme: "dark" });
  await signIn(mp, v.url, MEMBER.email, MEMBER.password);
  await mp.goto(`${v.url}/channels`);
  t.equal(
    await mp.getByRole("link", { name: "Organization: Acme Ops" }).count(),
    0,
    "a member is not offered it",
  );
  await axe(t, mp, "channels (dark)");
  const foreign = await mp.goto(`${v.url}/channels?account=${String(org.id)}`);
  t.equal(foreign?.status(), 404, "a member cannot open the organization's channels");

  // phone width: the tables scroll in their frame
  await page.setViewportSize({ width: 390, height: 800 });
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  t.ok(overflow <= 1, "no sideways scroll of the page at 390 px");
  await axe(t, page, "channels at 390 px");
});
