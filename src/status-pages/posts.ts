import { randomUUID } from "node:crypto";
import type { Actor } from "../core/actor.js";
import type { AppContext } from "../core/context.js";
import { invalidInput, notFound } from "../core/errors.js";
import { asManager } from "../identity/visibility.js";
import { forgetStatusPage } from "./cache.js";
import { readerOf, requireRole } from "./pages.js";
import type { PostStatus } from "./public-model.js";
import {
  deletePost,
  insertPost,
  insertUpdate,
  type PostRow,
  selectPosts,
  selectUpdates,
  selectVisiblePage,
  setPostStatus,
  touchPage,
  type UpdateRow,
} from "./repository.js";
import type { CreatePostBody, CreateUpdateBody } from "./schema.js";

/**
 * Public incident posts (issue #34): what members tell a page's visitors, in their own words,
 * with a status (investigating, identified, monitoring, resolved) and updates. They are separate
 * from Vigil's incidents: nothing of an incident's title or timeline reaches a visitor through
 * them, and writing one changes no incident. Every member of the page's account may write them;
 * changing the page itself needs its admins (pages.ts).
 */

/** The most posts GET answers, newest first. */
export const MAX_POSTS_LISTED = 200;

export interface StatusPagePost {
  id: string;
  status_page_id: string;
  title: string;
  status: PostStatus;
  created_at: string;
  updated_at: string;
  resolved_at: string | null;
  /** Newest first; the last one is the opening message. */
  updates: { id: string; status: PostStatus; message: string; created_at: string }[];
}

const iso = (d: Date | string) => new Date(d).toISOString();

function shown(p: PostRow, updates: UpdateRow[]): StatusPagePost {
  return {
    id: p.id,
    status_page_id: p.page_id,
    title: p.title,
    status: p.status,
    created_at: iso(p.created_at),
    updated_at: iso(p.updated_at),
    resolved_at: p.resolved_at ? iso(p.resolved_at) : null,
    updates: updates
      .filter((u) => u.post_id === p.id)
      .map((u) => ({ id: u.id, status: u.status, message: u.message, created_at: iso(u.created_at) })),
  };
}

/** The page when the caller sees it and may write its posts (an organization's: any member). */
async function writable(ctx: AppContext, actor: Actor, pageId: string) {
  const row = await selectVisiblePage(ctx.stores.db, readerOf(actor), pageId);
  if (!row) throw notFound(`Status page ${pageId} not found`);
  if (row.organization_id)
    await requireRole(ctx, actor, row.organization_id, "member", "write a status page's incident posts");
  return row;
}

const text = (field: string, v: string) => {
  const t = v.trim();
  if (!t) throw invalidInput(field, "must not be empty");
  return t;
};

async function one(ctx: AppContext, pageId: string, postId: string): Promise<StatusPagePost> {
  const [post] = await selectPosts(ctx.stores.db, pageId, { id: postId, limit: 1 });
  if (!post) throw notFound(`Incident post ${postId} not found on status page ${pageId}`);
  return shown(post, await selectUpdates(ctx.stores.db, [postId]));
}

/** POST /v1/status-pages/{id}/incidents: a post and its first update, shown at once. */
export async function createPost(
  ctx: AppContext,
  actor: Actor,
  pageId: string,
  body: CreatePostBody,
): Promise<StatusPagePost> {
  await writable(ctx, actor, pageId);
  const title = text("body.title", body.title);
  const message = text("body.message", body.message);
  const userId = asManager(actor).userId;
  const id = randomUUID();
  const at = ctx.now();
  await ctx.stores.db.transaction(async (tx) => {
    await insertPost(tx, { id, pageId, title, status: body.status, createdBy: userId, at });
    await insertUpdate(tx, {
      id: randomUUID(),
      postId: id,
      status: body.status,
      message,
      createdBy: userId,
      at,
    });
    await touchPage(tx, pageId, at);
  });
  await forgetStatusPage(ctx);
  return one(ctx, pageId, id);
}

/** POST /v1/status-pages/{id}/incidents/{incident_id}/updates: the post takes the update's status. */
export async function addPostUpdate(
  ctx: AppContext,
  actor: Actor,
  pageId: string,
  postId: string,
  body: CreateUpdateBody,
): Promise<StatusPagePost> {
  await writable(ctx, actor, pageId);
  const message = text("body.message", body.message);
  const userId = asManager(actor).userId;
  await ctx.stores.db.transaction(async (tx) => {
    const [post] = await selectPosts(tx, pageId, { id: postId, limit: 1, lock: true });
    if (!post) throw notFound(`Incident post ${postId} not found on status page ${pageId}`);
    // an update is never older than the post's last one, whatever the clocks of two nodes say
    const at = new Date(Math.max(ctx.now().getTime(), new Date(post.updated_at).getTime()));
    await insertUpdate(tx, { id: randomUUID(), postId, status: body.status, message, createdBy: userId, at });
    await setPostStatus(tx, postId, body.status, at);
    await touchPage(tx, pageId, at);
  });
  await forgetStatusPage(ctx);
  return one(ctx, pageId, postId);
}

/** GET /v1/status-pages/{id}/incidents: every post, newest first (at most MAX_POSTS_LISTED). */
export async function listPosts(
  ctx: AppContext,
  actor: Actor,
  pageId: string,
): Promise<{ incidents: StatusPagePost[] }> {
  const row = await selectVisiblePage(ctx.stores.db, readerOf(actor), pageId);
  if (!row) throw notFound(`Status page ${pageId} not found`);
  const posts = await selectPosts(ctx.stores.db, pageId, { limit: MAX_POSTS_LISTED });
  const updates = await selectUpdates(
    ctx.stores.db,
    posts.map((p) => p.id),
  );
  return { incidents: posts.map((p) => shown(p, updates)) };
}

/** GET /v1/status-pages/{id}/incidents/{incident_id}. */
export async function getPost(
  ctx: AppContext,
  actor: Actor,
  pageId: string,
  postId: string,
): Promise<StatusPagePost> {
  const row = await selectVisiblePage(ctx.stores.db, readerOf(actor), pageId);
  if (!row) throw notFound(`Status page ${pageId} not found`);
  return one(ctx, pageId, postId);
}

/** DELETE /v1/status-pages/{id}/incidents/{incident_id}: a post written by mistake, gone from the page at once. */
export async function removePost(
  ctx: AppContext,
  actor: Actor,
  pageId: string,
  postId: string,
): Promise<{ id: string; deleted: true }> {
  await writable(ctx, actor, pageId);
  const removed = await ctx.stores.db.transaction(async (tx) => {
    const ok = await deletePost(tx, pageId, postId);
    if (ok) await touchPage(tx, pageId, ctx.now());
    return ok;
  });
  if (!removed) throw notFound(`Incident post ${postId} not found on status page ${pageId}`);
  await forgetStatusPage(ctx);
  return { id: postId, deleted: true };
}
