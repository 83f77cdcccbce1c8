import { addPostUpdate, createPost, getPost, listPosts, removePost } from "../../status-pages/posts.js";
import {
  createStatusPage,
  deleteStatusPage,
  getStatusPage,
  listStatusPages,
  updateStatusPage,
} from "../../status-pages/pages.js";
import {
  createPostBody,
  createStatusPageBody,
  createUpdateBody,
  MAX_LOGO_BYTES,
  MAX_PAGES_PER_ACCOUNT,
  postParams,
  statusPageParams,
  updateStatusPageBody,
} from "../../status-pages/schema.js";
import { envelopeError } from "../responses/errors.js";
import {
  statusPage,
  statusPageDeleted,
  statusPageList,
  statusPagePost,
  statusPagePostDeleted,
  statusPagePostList,
} from "../responses/status-pages.js";
import { defineRoute } from "../route.js";

/**
 * Status pages (docs/status-pages.md): what an account tells its own users at /status/{slug},
 * without an account. Members manage them here; visitors read them through the public routes
 * (src/status-pages/public.ts), which are not part of this API.
 */
const tag = "Status pages";
const account =
  "A page belongs to the caller's personal account or to an organization, whose admins and owners change it; every " +
  "member sees it and writes its incident posts (an organization key: its own organization only).";
/** A logo in base64 is a third larger than the image. */
const BODY_LIMIT = Math.ceil((MAX_LOGO_BYTES * 4) / 3) + 256 * 1024;

const checks =
  "400 naming the field for a slug that is not URL-safe or is reserved, a logo that is not an image or too large, a " +
  "host name that is not one, an empty title or name, a connection of another account or listed twice; 404/403 for a " +
  "connection that does not exist or the key may not see; 409 for a slug or custom domain another page holds. Nothing " +
  "is stored unless every check passes. Text is stored as written and always shown as text (HTML escaped).";

export const statusPageRoutes = [
  defineRoute({
    tag,
    errorStyle: "envelope",
    method: "POST",
    path: "/v1/status-pages",
    summary: "Create a public status page",
    description:
      'Body: {"slug", "title", "description", "show_response_times", "groups": [{"name", "components": ' +
      '[{"connection_id", "display_name"}]}]}, optionally "logo" (a data URL), "custom_domain" and "organization_id". ' +
      `Visitors read it at once at /status/{slug}. ${account} ${checks} At most ${MAX_PAGES_PER_ACCOUNT} pages per account: 409.`,
    auth: "connections:write",
    body: createStatusPageBody,
    bodyLimit: BODY_LIMIT,
    status: 201,
    responses: { 201: statusPage, 404: envelopeError, 409: envelopeError },
    handler: ({ ctx, actor, body }) => createStatusPage(ctx, actor, body),
  }),
  defineRoute({
    tag,
    errorStyle: "envelope",
    method: "GET",
    path: "/v1/status-pages",
    summary: "The status pages the key sees",
    description:
      "A personal key sees its personal pages and those of every organization its user belongs to.",
    auth: "connections:read",
    status: 200,
    responses: { 200: statusPageList },
    handler: ({ ctx, actor }) => listStatusPages(ctx, actor),
  }),
  defineRoute({
    tag,
    errorStyle: "envelope",
    method: "GET",
    path: "/v1/status-pages/:id",
    summary: "One status page",
    description: "404 when the key does not see it (another account's is not found either).",
    auth: "connections:read",
    params: statusPageParams,
    status: 200,
    responses: { 200: statusPage },
    handler: ({ ctx, actor, params }) => getStatusPage(ctx, actor, params.id),
  }),
  defineRoute({
    tag,
    errorStyle: "envelope",
    method: "PUT",
    path: "/v1/status-pages/:id",
    summary: "Replace a status page's settings and components",
    description:
      "The same body as POST without organization_id (the account stays); an absent logo keeps the current one, null " +
      `removes it. A connection that stays on the page keeps its component key (badge URLs). ${account} ${checks}`,
    auth: "connections:write",
    params: statusPageParams,
    body: updateStatusPageBody,
    bodyLimit: BODY_LIMIT,
    status: 200,
    responses: { 200: statusPage, 404: envelopeError, 409: envelopeError },
    handler: ({ ctx, actor, params, body }) => updateStatusPage(ctx, actor, params.id, body),
  }),
  defineRoute({
    tag,
    errorStyle: "envelope",
    method: "DELETE",
    path: "/v1/status-pages/:id",
    summary: "Delete a status page",
    description: `Its public page, feed, summary and badges answer 404 at once, with its posts gone. ${account}`,
    auth: "connections:write",
    params: statusPageParams,
    status: 200,
    responses: { 200: statusPageDeleted },
    handler: ({ ctx, actor, params }) => deleteStatusPage(ctx, actor, params.id),
  }),
  defineRoute({
    tag,
    errorStyle: "envelope",
    method: "POST",
    path: "/v1/status-pages/:id/incidents",
    summary: "Post a public incident on a status page",
    description:
      'Body: {"title", "status", "message"}, status investigating, identified, monitoring or resolved. Visitors see ' +
      "it at once, apart from Vigil's own incidents and their timelines, which never reach a visitor. Any member of the " +
      "page's account may post.",
    auth: "connections:write",
    params: statusPageParams,
    body: createPostBody,
    status: 201,
    responses: { 201: statusPagePost, 404: envelopeError },
    handler: ({ ctx, actor, params, body }) => createPost(ctx, actor, params.id, body),
  }),
  defineRoute({
    tag,
    errorStyle: "envelope",
    method: "GET",
    path: "/v1/status-pages/:id/incidents",
    summary: "A status page's incident posts",
    auth: "connections:read",
    params: statusPageParams,
    status: 200,
    responses: { 200: statusPagePostList },
    handler: ({ ctx, actor, params }) => listPosts(ctx, actor, params.id),
  }),
  defineRoute({
    tag,
    errorStyle: "envelope",
    method: "GET",
    path: "/v1/status-pages/:id/incidents/:incident_id",
    summary: "One incident post with its updates",
    auth: "connections:read",
    params: postParams,
    status: 200,
    responses: { 200: statusPagePost },
    handler: ({ ctx, actor, params }) => getPost(ctx, actor, params.id, params.incident_id),
  }),
  defineRoute({
    tag,
    errorStyle: "envelope",
    method: "POST",
    path: "/v1/status-pages/:id/incidents/:incident_id/updates",
    summary: "Add an update to an incident post",
    description:
      'Body: {"status", "message"}; the post takes the update\'s status (resolved sets resolved_at; a later update ' +
      "that is not resolved reopens it).",
    auth: "connections:write",
    params: postParams,
    body: createUpdateBody,
    status: 201,
    responses: { 201: statusPagePost, 404: envelopeError },
    handler: ({ ctx, actor, params, body }) => addPostUpdate(ctx, actor, params.id, params.incident_id, body),
  }),
  defineRoute({
    tag,
    errorStyle: "envelope",
    method: "DELETE",
    path: "/v1/status-pages/:id/incidents/:incident_id",
    summary: "Remove an incident post written by mistake",
    auth: "connections:write",
    params: postParams,
    status: 200,
    responses: { 200: statusPagePostDeleted },
    handler: ({ ctx, actor, params }) => removePost(ctx, actor, params.id, params.incident_id),
  }),
];
