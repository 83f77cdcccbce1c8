import type { Queryable } from "../stores/relational/types.js";
import type { PostStatus } from "./public-model.js";

/**
 * Every statement on the status page tables (sql/postgres/029_status_pages.sql). Members manage
 * pages through pages.ts and posts.ts; visitors never reach these functions but through the
 * snapshot builder (snapshot.ts), which reads what a page shows in a few statements.
 */

/** An account as status pages name it: a user's personal account or an organization. */
export type PageAccount = { scope: "user" | "organization"; id: string };

/** Who reads pages: as maintenance windows (a personal key sees its user's and its organizations'). */
export type PageReader = { userId: string; organizationKey: string | null };

export interface StatusPageRow extends Record<string, unknown> {
  id: string;
  user_id: string | null;
  organization_id: string | null;
  slug: string;
  title: string;
  description: string | null;
  show_response_times: boolean;
  custom_domain: string | null;
  logo_type: string | null;
  logo_hash: string | null;
  logo_bytes: number | null;
  created_at: Date;
  updated_at: Date;
}

export interface ComponentRow extends Record<string, unknown> {
  page_id: string;
  connection_id: string;
  key: string;
  group_position: number;
  group_name: string;
  position: number;
  display_name: string;
}

export interface PostRow extends Record<string, unknown> {
  id: string;
  page_id: string;
  title: string;
  status: PostStatus;
  created_at: Date;
  updated_at: Date;
  resolved_at: Date | null;
}

export interface UpdateRow extends Record<string, unknown> {
  id: string;
  post_id: string;
  status: PostStatus;
  message: string;
  created_at: Date;
}

function binder() {
  const params: unknown[] = [];
  return { params, param: (v: unknown) => `$${params.push(v)}` };
}

const COLUMNS = `p.id, p.user_id, p.organization_id, p.slug, p.title, p.description, p.show_response_times,
  p.custom_domain, p.logo_type, p.logo_hash, octet_length(p.logo) AS logo_bytes, p.created_at, p.updated_at`;

/**
 * A component counts only while its connection belongs to the page's account: one moved to
 * another organization (or made personal) since is never shown, so a page never reaches another
 * account's connection.
 */
export const STILL_OWNED = `(c.organization_id = p.organization_id
  OR (p.organization_id IS NULL AND c.organization_id IS NULL AND c.user_id = p.user_id))`;

const visibleTo = (r: PageReader, param: (v: unknown) => string) =>
  r.organizationKey !== null
    ? `p.organization_id = ${param(r.organizationKey)}`
    : `((p.user_id = ${param(r.userId)} AND p.organization_id IS NULL)
        OR p.organization_id IN (SELECT m.organization_id FROM memberships m WHERE m.user_id = ${param(r.userId)}))`;

/** The pages the reader sees, oldest first. */
export async function selectVisiblePages(db: Queryable, r: PageReader): Promise<StatusPageRow[]> {
  const { params, param } = binder();
  const q = await db.query<StatusPageRow>(
    `SELECT ${COLUMNS} FROM status_pages p WHERE ${visibleTo(r, param)} ORDER BY p.created_at, p.id`,
    params,
  );
  return q.rows;
}

/** The page when the reader sees it; null otherwise (another account's is not told apart from none). */
export async function selectVisiblePage(
  db: Queryable,
  r: PageReader,
  id: string,
  opts: { lock?: boolean } = {},
): Promise<StatusPageRow | null> {
  const { params, param } = binder();
  const q = await db.query<StatusPageRow>(
    `SELECT ${COLUMNS} FROM status_pages p WHERE p.id = ${param(id)} AND ${visibleTo(r, param)}${
      opts.lock ? " FOR NO KEY UPDATE OF p" : ""
    }`,
    params,
  );
  return q.rows[0] ?? null;
}

/** The page by slug or custom domain, for the public side (no reader: anyone may look). */
export async function selectPublicPage(
  db: Queryable,
  by: { slug: string } | { domain: string },
): Promise<StatusPageRow | null> {
  const q = await db.query<StatusPageRow>(
    `SELECT ${COLUMNS} FROM status_pages p WHERE ${"slug" in by ? "p.slug" : "p.custom_domain"} = $1`,
    ["slug" in by ? by.slug : by.domain],
  );
  return q.rows[0] ?? null;
}

/** Every page's slug and custom domain (the public side's map of what exists). */
export async function selectPublicNames(
  db: Queryable,
): Promise<{ custom_domain: string | null; slug: string }[]> {
  const q = await db.query<{ custom_domain: string | null; slug: string }>(
    "SELECT custom_domain, slug FROM status_pages",
  );
  return q.rows;
}

/** The page's components in order; with `owned`, only those whose connection still belongs to its account. */
export async function selectComponents(
  db: Queryable,
  pageIds: string[],
  owned = true,
): Promise<ComponentRow[]> {
  if (pageIds.length === 0) return [];
  const q = await db.query<ComponentRow>(
    `SELECT sc.page_id, sc.connection_id, sc.key, sc.group_position, sc.group_name, sc.position, sc.display_name
       FROM status_page_components sc
       JOIN status_pages p ON p.id = sc.page_id
       JOIN connections c ON c.id = sc.connection_id
      WHERE sc.page_id = ANY($1::text[])${owned ? ` AND ${STILL_OWNED}` : ""}
      ORDER BY sc.page_id, sc.group_position, sc.position`,
    [pageIds],
  );
  return q.rows;
}

/** The logo of a page by slug or custom domain. */
export async function selectLogo(
  db: Queryable,
  slug: string,
): Promise<{ logo: Uint8Array; logo_type: string; logo_hash: string } | null> {
  const q = await db.query<{ logo: Uint8Array; logo_type: string; logo_hash: string }>(
    "SELECT logo, logo_type, logo_hash FROM status_pages WHERE slug = $1 AND logo IS NOT NULL",
    [slug],
  );
  return q.rows[0] ?? null;
}

export interface PageWrite {
  slug: string;
  title: string;
  description: string | null;
  showResponseTimes: boolean;
  customDomain: string | null;
  /** undefined: keep the current logo; null: none. */
  logo: { bytes: Uint8Array; type: string; hash: string } | null | undefined;
}

export async function insertPage(
  tx: Queryable,
  p: PageWrite & { id: string; account: PageAccount; createdBy: string; at: Date },
): Promise<void> {
  await tx.query(
    `INSERT INTO status_pages (id, user_id, organization_id, slug, title, description, show_response_times,
       custom_domain, logo, logo_type, logo_hash, created_by, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $13)`,
    [
      p.id,
      p.account.scope === "user" ? p.account.id : null,
      p.account.scope === "organization" ? p.account.id : null,
      p.slug,
      p.title,
      p.description,
      p.showResponseTimes,
      p.customDomain,
      p.logo?.bytes ?? null,
      p.logo?.type ?? null,
      p.logo?.hash ?? null,
      p.createdBy,
      p.at,
    ],
  );
}

export async function updatePage(tx: Queryable, id: string, p: PageWrite & { at: Date }): Promise<void> {
  const keepLogo = p.logo === undefined;
  await tx.query(
    `UPDATE status_pages SET slug = $2, title = $3, description = $4, show_response_times = $5, custom_domain = $6,
       logo = CASE WHEN $7 THEN logo ELSE $8::bytea END,
       logo_type = CASE WHEN $7 THEN logo_type ELSE $9 END,
       logo_hash = CASE WHEN $7 THEN logo_hash ELSE $10 END,
       updated_at = GREATEST(updated_at + interval '1 millisecond', $11)
     WHERE id = $1`,
    [
      id,
      p.slug,
      p.title,
      p.description,
      p.showResponseTimes,
      p.customDomain,
      keepLogo,
      p.logo?.bytes ?? null,
      p.logo?.type ?? null,
      p.logo?.hash ?? null,
      p.at,
    ],
  );
}

/** Replaces the page's components; keys of connections that stay are kept by the caller. */
export async function replaceComponents(
  tx: Queryable,
  pageId: string,
  rows: Omit<ComponentRow, "page_id">[],
): Promise<void> {
  await tx.query("DELETE FROM status_page_components WHERE page_id = $1", [pageId]);
  if (rows.length === 0) return;
  await tx.query(
    `INSERT INTO status_page_components (page_id, connection_id, key, group_position, group_name, position, display_name)
     SELECT $1, * FROM unnest($2::text[], $3::text[], $4::int[], $5::text[], $6::int[], $7::text[])`,
    [
      pageId,
      rows.map((r) => r.connection_id),
      rows.map((r) => r.key),
      rows.map((r) => r.group_position),
      rows.map((r) => r.group_name),
      rows.map((r) => r.position),
      rows.map((r) => r.display_name),
    ],
  );
}

/** Moves the page's updated_at: the public caches of every process see a change (cache.ts). */
export async function touchPage(tx: Queryable, id: string, at: Date): Promise<void> {
  await tx.query(
    "UPDATE status_pages SET updated_at = GREATEST(updated_at + interval '1 millisecond', $2) WHERE id = $1",
    [id, at],
  );
}

export async function deletePage(tx: Queryable, id: string): Promise<boolean> {
  const r = await tx.query("DELETE FROM status_pages WHERE id = $1 RETURNING id", [id]);
  return r.rows.length > 0;
}

/** How many pages the account has (the per-account cap). */
export async function countPages(tx: Queryable, a: PageAccount): Promise<number> {
  const r = await tx.query<{ n: number }>(
    a.scope === "organization"
      ? "SELECT count(*)::int AS n FROM status_pages WHERE organization_id = $1"
      : "SELECT count(*)::int AS n FROM status_pages WHERE user_id = $1 AND organization_id IS NULL",
    [a.id],
  );
  return r.rows[0]?.n ?? 0;
}

/** Whether a slug or a custom domain is taken by another page than `except`. */
export async function taken(
  db: Queryable,
  what: "slug" | "custom_domain",
  value: string,
  except: string | null,
): Promise<boolean> {
  const r = await db.query(
    `SELECT 1 FROM status_pages WHERE ${what === "slug" ? "slug" : "custom_domain"} = $1 AND ($2::text IS NULL OR id <> $2)`,
    [value, except],
  );
  return r.rows.length > 0;
}

// ---- posts ---------------------------------------------------------------------------------------

export async function insertPost(
  tx: Queryable,
  p: { id: string; pageId: string; title: string; status: PostStatus; createdBy: string; at: Date },
): Promise<void> {
  await tx.query(
    `INSERT INTO status_page_posts (id, page_id, title, status, created_by, created_at, updated_at, resolved_at)
     VALUES ($1, $2, $3, $4, $5, $6, $6, CASE WHEN $4 = 'resolved' THEN $6::timestamptz END)`,
    [p.id, p.pageId, p.title, p.status, p.createdBy, p.at],
  );
}

export async function insertUpdate(
  tx: Queryable,
  u: { id: string; postId: string; status: PostStatus; message: string; createdBy: string; at: Date },
): Promise<void> {
  await tx.query(
    `INSERT INTO status_page_post_updates (id, post_id, status, message, created_by, created_at)
     VALUES ($1, $2, $3, $4, $5, $6)`,
    [u.id, u.postId, u.status, u.message, u.createdBy, u.at],
  );
}

/** Sets a post's status from a new update; resolved_at is set when it resolves and cleared when it reopens. */
export async function setPostStatus(
  tx: Queryable,
  postId: string,
  status: PostStatus,
  at: Date,
): Promise<void> {
  await tx.query(
    `UPDATE status_page_posts SET status = $2, updated_at = $3,
       resolved_at = CASE WHEN $2 = 'resolved' THEN COALESCE(resolved_at, $3::timestamptz) END
     WHERE id = $1`,
    [postId, status, at],
  );
}

/** The page's posts, newest first: those not resolved, and those resolved since `since`, at most `limit`. */
export async function selectPosts(
  db: Queryable,
  pageId: string,
  opts: { since?: Date; limit: number; id?: string; lock?: boolean },
): Promise<PostRow[]> {
  const q = await db.query<PostRow>(
    `SELECT id, page_id, title, status, created_at, updated_at, resolved_at FROM status_page_posts
      WHERE page_id = $1 AND ($2::text IS NULL OR id = $2)
        AND ($3::timestamptz IS NULL OR resolved_at IS NULL OR resolved_at >= $3)
      ORDER BY created_at DESC, id DESC LIMIT $4${opts.lock ? " FOR NO KEY UPDATE" : ""}`,
    [pageId, opts.id ?? null, opts.since ?? null, opts.limit],
  );
  return q.rows;
}

/** The updates of the posts, newest first. */
export async function selectUpdates(db: Queryable, postIds: string[]): Promise<UpdateRow[]> {
  if (postIds.length === 0) return [];
  const q = await db.query<UpdateRow>(
    `SELECT id, post_id, status, message, created_at FROM status_page_post_updates
      WHERE post_id = ANY($1::text[]) ORDER BY created_at DESC, id DESC`,
    [postIds],
  );
  return q.rows;
}

export async function deletePost(tx: Queryable, pageId: string, postId: string): Promise<boolean> {
  const r = await tx.query("DELETE FROM status_page_posts WHERE id = $1 AND page_id = $2 RETURNING id", [
    postId,
    pageId,
  ]);
  return r.rows.length > 0;
}

// ---- what the public side reads --------------------------------------------------------------

/**
 * A page's fingerprint: it changes whenever what a visitor sees may have, time apart (its
 * updated_at, which every change of the page or its posts moves; its components' connection
 * statuses and ownership; their unresolved availability, missed-heartbeat and SLO incidents; the
 * maintenance windows of its account, any of which may cover a component).
 */
export async function selectFingerprint(
  db: Queryable,
  slug: string,
): Promise<{ id: string; fp: string } | null> {
  const q = await db.query<{
    id: string;
    updated_at: Date;
    comps: string | null;
    open: string | null;
    windows: string | null;
  }>(
    `SELECT p.id, p.updated_at,
       (SELECT string_agg(sc.key || ':' || c.status || ':' || CASE WHEN ${STILL_OWNED} THEN 'y' ELSE 'n' END, ','
                          ORDER BY sc.group_position, sc.position)
          FROM status_page_components sc JOIN connections c ON c.id = sc.connection_id
         WHERE sc.page_id = p.id) AS comps,
       (SELECT string_agg(i.id || ':' || i.status, ',' ORDER BY i.id)
          FROM incidents i JOIN status_page_components sc ON sc.connection_id = i.connection_id
         WHERE sc.page_id = p.id AND i.status <> 'resolved'
           AND i.kind IN ('availability', 'missed_heartbeat', 'slo_burn')) AS open,
       (SELECT string_agg(w.id, ',' ORDER BY w.id) FROM maintenance_windows w
         WHERE (w.organization_id = p.organization_id
            OR (p.organization_id IS NULL AND w.organization_id IS NULL AND w.user_id = p.user_id))
           AND (w.ends_at IS NULL OR w.ends_at > now() - interval '1 day')) AS windows
     FROM status_pages p WHERE p.slug = $1`,
    [slug],
  );
  const r = q.rows[0];
  if (!r) return null;
  return {
    id: r.id,
    fp: `${new Date(r.updated_at).toISOString()}|${r.comps ?? ""}|${r.open ?? ""}|${r.windows ?? ""}`,
  };
}

/** Each connection's status. */
export async function selectStatuses(db: Queryable, ids: string[]): Promise<Map<string, string>> {
  if (ids.length === 0) return new Map();
  const q = await db.query<{ id: string; status: string }>(
    "SELECT id, status FROM connections WHERE id = ANY($1::text[])",
    [ids],
  );
  return new Map(q.rows.map((r) => [r.id, r.status]));
}

export interface PublicIncidentRow extends Record<string, unknown> {
  connection_id: string;
  kind: string;
  opened_at: Date;
  resolved_at: Date | null;
}

/** The connections' incidents of `kinds` unresolved or resolved since `since`, newest first: their times only. */
export async function selectIncidentTimes(
  db: Queryable,
  ids: string[],
  kinds: string[],
  since: Date,
): Promise<PublicIncidentRow[]> {
  if (ids.length === 0) return [];
  const q = await db.query<PublicIncidentRow>(
    `SELECT connection_id, kind, opened_at, resolved_at FROM incidents
      WHERE connection_id = ANY($1::text[]) AND kind = ANY($2::text[])
        AND (status <> 'resolved' OR resolved_at >= $3)
      ORDER BY opened_at DESC`,
    [ids, kinds, since],
  );
  return q.rows;
}

/** Owner of each existing connection among `ids`: its organization, or its user for a personal one. */
export async function selectConnectionOwners(
  db: Queryable,
  ids: string[],
): Promise<{ id: string; user_id: string; organization_id: string | null }[]> {
  if (ids.length === 0) return [];
  const r = await db.query<{ id: string; user_id: string; organization_id: string | null }>(
    "SELECT id, user_id, organization_id FROM connections WHERE id = ANY($1::text[])",
    [ids],
  );
  return r.rows;
}
