/// <reference lib="dom" />
// (page.evaluate callbacks run in the browser: the DOM types are needed by the browser tests)
import fs from "node:fs";
import { createRequire } from "node:module";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { type Browser, type BrowserContext, chromium, type Page } from "playwright-core";
import type { Test } from "tap";
import { packageRoot } from "../../src/lib/paths.js";
import { spawnVigil, type Running } from "../helpers/process.js";

/**
 * The dashboard's browser tests drive a real Chromium (Debian's `chromium` package, or
 * CHROMIUM_PATH) through playwright-core against a real `vigil serve` process. Nothing is faked
 * but the monitored platforms (`vigil sim`) and the mail server.
 *
 * - `vigil(t, env)`: `vigil serve` on a free port, PUBLIC_URL set to it (so links in e-mails
 *   work), on the embedded default (a fresh DATA_DIR) unless `env` says otherwise.
 * - `browser(t)`: one headless Chromium for the file; `newPage(t, b)` a page that fails the test
 *   on any Content-Security-Policy violation or script error.
 * - `axe(t, page, label)`: runs axe-core in the page (WCAG 2.1 A/AA rules) and fails on any
 *   violation, naming the rule and the elements.
 * - `shot(page, name)`: a screenshot into docs/screenshots/NAME.png for docs/dashboard.md (the same
 *   tests make them, so they stay current).
 */

const require = createRequire(import.meta.url);
const AXE_SOURCE = fs.readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");
const IN_CI = process.env.CI === "true";

export function chromiumPath(): string | null {
  const candidates = [process.env.CHROMIUM_PATH, "/usr/bin/chromium", "/usr/bin/chromium-browser"];
  return candidates.find((p): p is string => !!p && fs.existsSync(p)) ?? null;
}

/** Skips the test (fails it under CI=true) when no Chromium is installed; answers whether to go on. */
export function requireChromium(t: Test): boolean {
  if (chromiumPath()) return true;
  const why = "no Chromium: apt-get install chromium, or set CHROMIUM_PATH";
  if (IN_CI) t.fail(why);
  else t.plan(0, why);
  return false;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

export interface Vigil extends Running {
  url: string;
  env: Record<string, string>;
  /** Runs `vigil admin …` against the same stores and answers its JSON. */
  admin(...args: string[]): Promise<Record<string, unknown>>;
}

/** `vigil serve` on a free port with PUBLIC_URL pointing at it; the embedded default unless `env` says. */
export async function vigil(t: Test, env: Record<string, string> = {}, args: string[] = []): Promise<Vigil> {
  const port = await freePort();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "vigil-browser-"));
  t.teardown(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  const full = {
    VIGIL_DATA_DIR: dataDir,
    VIGIL_SECRET: "browser-test-secret-browser-test-secret-01",
    PORT: String(port),
    PUBLIC_URL: `http://127.0.0.1:${port}`,
    LOG_LEVEL: "info",
    ...env,
  };
  const server = spawnVigil(t, ["serve", ...args], full);
  const m = await server.waitFor(/Server listening at (http:\/\/127\.0\.0\.1:\d+)/, 60_000);
  await server.waitFor(/series store ready/, 60_000).catch(() => {});
  return {
    ...server,
    url: m[1] as string,
    env: full,
    async admin(...a: string[]) {
      const run = spawnVigil(t, ["admin", ...a], full);
      const { code } = await run.exited(60_000);
      const last = run.output().trim().split("\n").pop() ?? "";
      if (code !== 0) throw new Error(`vigil admin ${a.join(" ")} exited ${code}: ${run.output()}`);
      return JSON.parse(last) as Record<string, unknown>;
    },
  };
}

/** One headless Chromium for the test file, closed at its end. */
export async function browser(t: Test): Promise<Browser> {
  const b = await chromium.launch({
    executablePath: chromiumPath() ?? undefined,
    headless: true,
    // root in containers has no user namespaces for the sandbox
    args: ["--no-sandbox", "--disable-dev-shm-usage"],
  });
  t.teardown(() => b.close());
  return b;
}

/**
 * A fresh browser context (its own cookies) and page. Any CSP violation or uncaught script error
 * fails the test: the dashboard's policy allows no inline script or style.
 */
export async function newPage(
  t: Test,
  b: Browser,
  opts: { viewport?: { width: number; height: number }; colorScheme?: "light" | "dark" } = {},
): Promise<{ page: Page; context: BrowserContext }> {
  const context = await b.newContext({
    viewport: opts.viewport ?? { width: 1280, height: 860 },
    colorScheme: opts.colorScheme ?? "light",
    permissions: ["clipboard-read", "clipboard-write"],
  });
  t.teardown(() => context.close().catch(() => {}));
  const page = await context.newPage();
  page.on("console", (msg) => {
    const text = msg.text();
    if (/Content.Security.Policy|Refused to (load|execute|apply)/i.test(text))
      t.fail(`CSP violation: ${text}`);
  });
  page.on("pageerror", (err) => t.fail(`script error in the page: ${err.message}`));
  return { page, context };
}

/** axe-core over the page as it stands; fails the test on any WCAG 2.1 A/AA violation. */
export async function axe(t: Test, page: Page, label: string): Promise<void> {
  // evaluated through the DevTools protocol, which the page's CSP does not govern
  await page.evaluate(AXE_SOURCE);
  const result = (await page.evaluate(() =>
    (
      globalThis as unknown as {
        axe: { run(ctx: unknown, opts: unknown): Promise<unknown> };
      }
    ).axe.run(document, { runOnly: { type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"] } }),
  )) as { violations: { id: string; help: string; nodes: { target: string[] }[] }[] };
  const problems = result.violations.map(
    (v) =>
      `${v.id} (${v.help}): ${v.nodes
        .map((n) => n.target.join(" "))
        .slice(0, 5)
        .join(", ")}`,
  );
  t.same(problems, [], `${label}: no accessibility violations (axe-core, WCAG 2.1 AA)`);
}

/** A full-page screenshot into docs/screenshots/NAME.png. */
export async function shot(page: Page, name: string): Promise<void> {
  const dir = path.join(packageRoot, "docs", "screenshots");
  fs.mkdirSync(dir, { recursive: true });
  await page.screenshot({ path: path.join(dir, `${name}.png`), fullPage: false });
}

/** Signs in through /signin; resolves once the dashboard answered. */
export async function signIn(page: Page, base: string, email: string, password: string): Promise<void> {
  await page.goto(`${base}/signin`);
  await page.getByLabel("Email").fill(email);
  await page.getByLabel("Password").fill(password);
  await Promise.all([page.waitForLoadState("load"), page.getByRole("button", { name: /sign in/i }).click()]);
}
