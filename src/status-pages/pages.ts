import { createHash, randomInt, randomUUID } from "node:crypto";
import { isIP } from "node:net";
import type { Actor } from "../core/actor.js";
import type { AppContext } from "../core/context.js";
import { conflict, forbidden, invalidInput, notFound } from "../core/errors.js";
import { asManager, connectionsAccess, roleIn } from "../identity/visibility.js";
import { forgetStatusPage } from "./cache.js";
import {
  countPages,
  deletePage,
  insertPage,
  type PageAccount,
  type PageReader,
  type PageWrite,
  replaceComponents,
  selectConnectionOwners,
  selectComponents,
  selectVisiblePage,
  selectVisiblePages,
  type StatusPageRow,
  taken,
  updatePage,
} from "./repository.js";
import {
  type CreateStatusPageBody,
  MAX_COMPONENTS,
  MAX_LOGO_BYTES,
  MAX_PAGES_PER_ACCOUNT,
  RESERVED_SLUGS,
  type UpdateStatusPageBody,
} from "./schema.js";

/**
 * Status pages (issue #34; docs/status-pages.md): an account's admins choose some of its
 * connections, give each a public display name in a group, and Vigil serves a public page at
 * /status/{slug} (src/http/status-pages.ts). A page belongs to one account, like a maintenance window: the
 * caller's personal account, or an organization whose admins and owners manage it; every member
 * sees it and writes its incident posts (posts.ts).
 */

/** A page as the API answers it (members only: it names the connections). */
export interface StatusPage {
  id: string;
  organization_id: string | null;
  slug: string;
  title: string;
  description: string | null;
  show_response_times: boolean;
  custom_domain: string | null;
  logo: { content_type: string; bytes: number; url: string } | null;
  /** Where visitors read it. */
  url: string;
  groups: {
    name: string;
    components: { connection_id: string; display_name: string; key: string; badge_url: string }[];
  }[];
  created_at: string;
  updated_at: string;
}

const SLUG = /^[a-z0-9][a-z0-9-]{1,48}[a-z0-9]$/;
const LABEL = "[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?";
const HOST = new RegExp(`^(?=.{1,253}$)${LABEL}(?:\\.${LABEL})+$`);
const KEY_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789";

const iso = (d: Date | string) => new Date(d).toISOString();

/** The URL visitors read a page at: its custom domain when it has one, else PUBLIC_URL/status/{slug}. */
export function pageUrl(ctx: AppContext, p: { slug: string; custom_domain: string | null }): string {
  return p.custom_domain ? `https://${p.custom_domain}` : `${ctx.config.publicUrl}/status/${p.slug}`;
}

function shown(
  ctx: AppContext,
  r: StatusPageRow,
  components: {
    connection_id: string;
    key: string;
    group_position: number;
    group_name: string;
    display_name: string;
  }[],
): StatusPage {
  const url = pageUrl(ctx, r);
  const groups: StatusPage["groups"] = [];
  let at = -1;
  for (const c of components) {
    if (c.group_position !== at) {
      groups.push({ name: c.group_name, components: [] });
      at = c.group_position;
    }
    groups[groups.length - 1]?.components.push({
      connection_id: c.connection_id,
      display_name: c.display_name,
      key: c.key,
      badge_url: `${url}/badge/${c.key}/status.svg`,
    });
  }
  return {
    id: r.id,
    organization_id: r.organization_id,
    slug: r.slug,
    title: r.title,
    description: r.description,
    show_response_times: r.show_response_times,
    custom_domain: r.custom_domain,
    logo:
      r.logo_type && r.logo_hash
        ? { content_type: r.logo_type, bytes: Number(r.logo_bytes ?? 0), url: `${url}/logo?v=${r.logo_hash}` }
        : null,
    url,
    groups,
    created_at: iso(r.created_at),
    updated_at: iso(r.updated_at),
  };
}

export function readerOf(actor: Actor): PageReader {
  const p = asManager(actor);
  return {
    userId: p.userId,
    organizationKey: p.type === "api_key" && p.scope === "organization" ? p.organizationId : null,
  };
}

/** 403 unless the caller holds `need` in the organization (an organization key: its own organization only). */
export async function requireRole(
  ctx: AppContext,
  actor: Actor,
  organizationId: string,
  need: "manager" | "member",
  what: string,
): Promise<void> {
  const p = asManager(actor);
  if (p.type === "api_key" && p.scope === "organization" && p.organizationId !== organizationId)
    throw forbidden(`An organization key can only ${what} of its own organization`);
  const role = await roleIn(ctx.stores.db, p.userId, organizationId);
  const ok = need === "member" ? role !== null : role === "admin" || role === "owner";
  if (!ok)
    throw forbidden(
      `Only an organization's ${need === "member" ? "members" : "admins and owners"} may ${what}; this key's user is ${role ? `a ${role}` : "not a member"}`,
    );
}

/** The account of a new page: body.organization_id, else an organization key's organization, else the caller's personal account. */
async function accountOf(
  ctx: AppContext,
  actor: Actor,
  organizationId: string | undefined,
): Promise<PageAccount> {
  const p = asManager(actor);
  const org =
    organizationId ?? (p.type === "api_key" && p.scope === "organization" ? p.organizationId : null);
  if (org === null) return { scope: "user", id: p.userId };
  await requireRole(ctx, actor, org, "manager", "create status pages");
  return { scope: "organization", id: org };
}

const trimmed = (field: string, v: string) => {
  const t = v.trim();
  if (t.length === 0) throw invalidInput(field, "must not be empty");
  return t;
};

/** A slug, checked: format, then reserved words. Taken is checked in the transaction. */
function checkSlug(raw: string): string {
  const slug = raw.trim();
  if (!SLUG.test(slug))
    throw invalidInput(
      "body.slug",
      "must be 3 to 50 lowercase letters, digits and hyphens, starting and ending with a letter or digit (e.g. acme-status)",
    );
  if (RESERVED_SLUGS.has(slug))
    throw invalidInput(
      "body.slug",
      `"${slug}" is reserved for Vigil's own paths; choose another, e.g. ${slug}-status`,
    );
  return slug;
}

/** A custom domain, checked: a lowercase host name with a dot, no port, not Vigil's own. */
function checkDomain(ctx: AppContext, raw: string | null | undefined): string | null {
  if (raw === null || raw === undefined || raw.trim() === "") return null;
  const host = raw.trim().toLowerCase().replace(/\.$/, "");
  if (!HOST.test(host) || isIP(host) !== 0)
    throw invalidInput(
      "body.custom_domain",
      "must be a host name such as status.example.com (letters, digits, hyphens and dots; no IP address, scheme, port or path)",
    );
  // Vigil's own host (and names under it) reach the API, the dashboard and the health probes
  const own = new URL(ctx.config.publicUrl).hostname.toLowerCase();
  if (host === own || host.endsWith(`.${own}`) || host === "localhost" || host.endsWith(".localhost"))
    throw invalidInput(
      "body.custom_domain",
      `is Vigil's own host (${own}) or a name under it; use a host name of your own`,
    );
  const allowed = ctx.config.statusPageDomains;
  if (allowed && !allowed.some((d) => (d.startsWith(".") ? host.endsWith(d) : host === d)))
    throw invalidInput(
      "body.custom_domain",
      `is not among the domains this server lets status pages use (STATUS_PAGE_DOMAINS: ${allowed.join(", ")}); ask its operator`,
    );
  return host;
}

const LOGO = /^data:(image\/(?:png|jpeg|gif|webp|svg\+xml));base64,([A-Za-z0-9+/=\s]+)$/;

/** What the first bytes of an image say it is. */
function sniff(b: Uint8Array): string | null {
  const ascii = (from: number, to: number) => Buffer.from(b.subarray(from, to)).toString("latin1");
  if (b[0] === 0x89 && ascii(1, 4) === "PNG") return "image/png";
  if (b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff) return "image/jpeg";
  if (ascii(0, 4) === "GIF8") return "image/gif";
  if (ascii(0, 4) === "RIFF" && ascii(8, 12) === "WEBP") return "image/webp";
  const head = Buffer.from(b.subarray(0, 2048))
    .toString("utf8")
    .replace(/^\uFEFF/, "");
  if (/^\s*(<\?xml[^>]*>\s*)?(<!--[\s\S]*?-->\s*)*(<!DOCTYPE svg[^>]*>\s*)?<svg[\s>]/i.test(head))
    return "image/svg+xml";
  return null;
}

/** A logo data URL, checked: an image of a known type whose bytes match, at most MAX_LOGO_BYTES. */
function checkLogo(raw: string | null | undefined): PageWrite["logo"] {
  if (raw === undefined) return undefined;
  if (raw === null) return null;
  const m = LOGO.exec(raw);
  if (!m?.[1] || !m[2])
    throw invalidInput(
      "body.logo",
      'must be a base64 data URL of a PNG, JPEG, GIF, WebP or SVG image, e.g. "data:image/png;base64,iVBOR…"',
    );
  const bytes = Buffer.from(m[2], "base64");
  if (bytes.length === 0) throw invalidInput("body.logo", "is empty");
  if (bytes.length > MAX_LOGO_BYTES)
    throw invalidInput(
      "body.logo",
      `is ${Math.ceil(bytes.length / 1024)} KiB; a logo may be at most ${MAX_LOGO_BYTES / 1024} KiB`,
    );
  const actual = sniff(bytes);
  if (actual === null) throw invalidInput("body.logo", `is not an image: its bytes are not a ${m[1]}`);
  if (actual !== m[1]) throw invalidInput("body.logo", `says ${m[1]} but its bytes are a ${actual}`);
  return { bytes, type: actual, hash: createHash("sha256").update(bytes).digest("hex").slice(0, 16) };
}

function newKey(): string {
  let k = "";
  for (let i = 0; i < 12; i++) k += KEY_ALPHABET[randomInt(KEY_ALPHABET.length)];
  return k;
}

type Groups = CreateStatusPageBody["groups"];

/**
 * The components of the groups, checked: each connection exists (404), the caller sees it (403),
 * it belongs to the page's account (400), it is on the page once (400); names not empty. Keys of
 * connections already on the page are kept so badge URLs stay.
 */
async function componentsOf(
  ctx: AppContext,
  actor: Actor,
  account: PageAccount,
  groups: Groups,
  previous: Map<string, string>,
) {
  const all = groups.flatMap((g, gi) => g.components.map((c, ci) => ({ ...c, gi, ci })));
  if (all.length > MAX_COMPONENTS)
    throw invalidInput("body.groups", `list ${all.length} components; a page has at most ${MAX_COMPONENTS}`);
  const seen = new Set<string>();
  for (const c of all) {
    const field = `body.groups.${c.gi}.components.${c.ci}.connection_id`;
    if (seen.has(c.connection_id))
      throw invalidInput(
        field,
        `connection ${c.connection_id} is on the page twice; list each connection once`,
      );
    seen.add(c.connection_id);
  }
  const ids = [...seen];
  const access = ids.length ? await connectionsAccess(ctx.stores.db, actor, ids) : new Map();
  for (const id of ids) if (access.get(id) === "absent") throw notFound(`Connection ${id} not found`);
  for (const id of ids)
    if (access.get(id) !== "ok") throw forbidden(`You do not have access to connection ${id}`);
  const owners = await selectConnectionOwners(ctx.stores.db, ids);
  const ownerOf = new Map(owners.map((o) => [o.id, o]));
  for (const c of all) {
    const o = ownerOf.get(c.connection_id);
    const mine =
      account.scope === "organization"
        ? o?.organization_id === account.id
        : o?.organization_id === null && o.user_id === account.id;
    if (!mine)
      throw invalidInput(
        `body.groups.${c.gi}.components.${c.ci}.connection_id`,
        `connection ${c.connection_id} belongs to another account than the page's (${
          account.scope === "organization" ? `organization ${account.id}` : "your personal account"
        }); a page shows only its own account's connections`,
      );
  }
  const used = new Set(previous.values());
  return all.map((c) => {
    let key = previous.get(c.connection_id);
    if (!key) {
      do key = newKey();
      while (used.has(key));
      used.add(key);
    }
    return {
      connection_id: c.connection_id,
      key,
      group_position: c.gi,
      group_name: trimmed(`body.groups.${c.gi}.name`, groups[c.gi]?.name ?? ""),
      position: c.ci,
      display_name: trimmed(`body.groups.${c.gi}.components.${c.ci}.display_name`, c.display_name),
    };
  });
}

function pageWrite(ctx: AppContext, body: UpdateStatusPageBody): PageWrite {
  const description = body.description?.trim() ? body.description.trim() : null;
  return {
    slug: checkSlug(body.slug),
    title: trimmed("body.title", body.title),
    description,
    showResponseTimes: body.show_response_times ?? false,
    customDomain: checkDomain(ctx, body.custom_domain),
    logo: checkLogo(body.logo),
  };
}

/** 409s for a slug or custom domain another page holds. */
async function checkFree(ctx: AppContext, w: PageWrite, except: string | null): Promise<void> {
  const db = ctx.stores.db;
  if (await taken(db, "slug", w.slug, except))
    throw conflict(`The slug "${w.slug}" is taken by another status page; choose another`);
  if (w.customDomain && (await taken(db, "custom_domain", w.customDomain, except)))
    throw conflict(`The custom domain ${w.customDomain} is taken by another status page`);
}

/** A unique violation on slug or domain between our check and the insert (two creators at once): 409. */
function uniqueRace(err: unknown, w: PageWrite): never {
  const e = err as { code?: string; constraint?: string; message?: string };
  if (e.code === "23505") {
    if (/domain/.test(e.constraint ?? e.message ?? ""))
      throw conflict(`The custom domain ${w.customDomain} is taken by another status page`);
    throw conflict(`The slug "${w.slug}" is taken by another status page; choose another`);
  }
  throw err;
}

async function answer(ctx: AppContext, actor: Actor, id: string): Promise<StatusPage> {
  const row = await selectVisiblePage(ctx.stores.db, readerOf(actor), id);
  if (!row) throw notFound(`Status page ${id} not found`);
  return shown(ctx, row, await selectComponents(ctx.stores.db, [id]));
}

/** POST /v1/status-pages. Nothing is stored unless every check passes. */
export async function createStatusPage(
  ctx: AppContext,
  actor: Actor,
  body: CreateStatusPageBody,
): Promise<StatusPage> {
  const p = asManager(actor);
  const w = pageWrite(ctx, body);
  const account = await accountOf(ctx, actor, body.organization_id);
  const components = await componentsOf(ctx, actor, account, body.groups, new Map());
  await checkFree(ctx, w, null);
  const id = randomUUID();
  const now = ctx.now();
  try {
    await ctx.stores.db.transaction(async (tx) => {
      const n = await countPages(tx, account);
      if (n >= MAX_PAGES_PER_ACCOUNT)
        throw conflict(
          `An account has at most ${MAX_PAGES_PER_ACCOUNT} status pages and this one has ${n}; delete one (DELETE /v1/status-pages/{id}) first`,
        );
      await insertPage(tx, { ...w, logo: w.logo ?? null, id, account, createdBy: p.userId, at: now });
      await replaceComponents(tx, id, components);
    });
  } catch (err) {
    uniqueRace(err, w);
  }
  await forgetStatusPage(ctx);
  return answer(ctx, actor, id);
}

/** GET /v1/status-pages: the pages the caller sees, oldest first. */
export async function listStatusPages(
  ctx: AppContext,
  actor: Actor,
): Promise<{ status_pages: StatusPage[] }> {
  const rows = await selectVisiblePages(ctx.stores.db, readerOf(actor));
  const comps = await selectComponents(
    ctx.stores.db,
    rows.map((r) => r.id),
  );
  return {
    status_pages: rows.map((r) =>
      shown(
        ctx,
        r,
        comps.filter((c) => c.page_id === r.id),
      ),
    ),
  };
}

/** GET /v1/status-pages/{id}: 404 when the caller does not see it. */
export const getStatusPage = (ctx: AppContext, actor: Actor, id: string) => answer(ctx, actor, id);

/** The page when the caller sees it and may change it (an organization's: its admins and owners). */
async function managed(ctx: AppContext, actor: Actor, id: string, what: string): Promise<StatusPageRow> {
  const row = await selectVisiblePage(ctx.stores.db, readerOf(actor), id);
  if (!row) throw notFound(`Status page ${id} not found`);
  if (row.organization_id) await requireRole(ctx, actor, row.organization_id, "manager", what);
  return row;
}

/** PUT /v1/status-pages/{id}: the page as a whole; its account stays, keys of kept connections too. */
export async function updateStatusPage(
  ctx: AppContext,
  actor: Actor,
  id: string,
  body: UpdateStatusPageBody,
): Promise<StatusPage> {
  const row = await managed(ctx, actor, id, "change status pages");
  const account: PageAccount = row.organization_id
    ? { scope: "organization", id: row.organization_id }
    : { scope: "user", id: row.user_id ?? "" };
  const w = pageWrite(ctx, body);
  const previous = new Map(
    (await selectComponents(ctx.stores.db, [id], false)).map((c) => [c.connection_id, c.key] as const),
  );
  const components = await componentsOf(ctx, actor, account, body.groups, previous);
  await checkFree(ctx, w, id);
  try {
    await ctx.stores.db.transaction(async (tx) => {
      await updatePage(tx, id, { ...w, at: ctx.now() });
      await replaceComponents(tx, id, components);
    });
  } catch (err) {
    uniqueRace(err, w);
  }
  await forgetStatusPage(ctx);
  return answer(ctx, actor, id);
}

/** DELETE /v1/status-pages/{id}: the public page, its feed and badges are gone at once (404). */
export async function deleteStatusPage(
  ctx: AppContext,
  actor: Actor,
  id: string,
): Promise<{ id: string; deleted: true }> {
  await managed(ctx, actor, id, "delete status pages");
  if (!(await deletePage(ctx.stores.db, id))) throw notFound(`Status page ${id} not found`);
  await forgetStatusPage(ctx);
  return { id, deleted: true };
}
