import { createHash } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { packageRoot } from "../../lib/paths.js";

/**
 * The public page's stylesheet (assets/status-page.css), inlined in its `<style>` element: the
 * page loads nothing but its logo, and its Content-Security-Policy allows exactly this text.
 * Read once per process, like the templates.
 */
export const STATUS_PAGE_CSS = fs.readFileSync(path.join(packageRoot, "assets", "status-page.css"), "utf8");

/**
 * The CSP source that allows the `<style>` element, `'sha256-<base64>'` of exactly its text:
 * `style-src 'sha256-…'` in the route's Content-Security-Policy header.
 */
export const STATUS_PAGE_STYLE_HASH = `'sha256-${createHash("sha256").update(STATUS_PAGE_CSS, "utf8").digest("base64")}'`;
