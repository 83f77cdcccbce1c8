import { z } from "zod";
import { POST_STATUSES } from "./public-model.js";

/** Limits of one page (docs/status-pages.md). */
export const MAX_PAGES_PER_ACCOUNT = 20;
export const MAX_GROUPS = 20;
export const MAX_COMPONENTS = 100;
export const MAX_TITLE = 120;
export const MAX_DESCRIPTION = 2_000;
export const MAX_NAME = 80;
export const MAX_POST_TITLE = 200;
export const MAX_MESSAGE = 5_000;
/** Largest logo, decoded. */
export const MAX_LOGO_BYTES = 256 * 1024;

/**
 * Paths a slug may not take: names of Vigil's own routes and words a visitor would mistake for
 * something other than an account's page.
 */
export const RESERVED_SLUGS: ReadonlySet<string> = new Set([
  "about",
  "admin",
  "api",
  "app",
  "assets",
  "badge",
  "badges",
  "connections",
  "dashboard",
  "docs",
  "feed",
  "healthz",
  "help",
  "incidents",
  "livez",
  "login",
  "logout",
  "mcp",
  "metrics",
  "new",
  "oauth",
  "openapi",
  "readyz",
  "root",
  "settings",
  "signin",
  "signout",
  "signup",
  "static",
  "status",
  "summary",
  "support",
  "system",
  "v1",
  "v2",
  "vigil",
  "well-known",
  "www",
]);

// ids compare in lower case, as everywhere in the API
const uuid = z.uuid({ error: "must be a UUID" }).toLowerCase();

const component = z.strictObject({
  connection_id: uuid.describe("a connection of the page's account"),
  display_name: z
    .string()
    .max(MAX_NAME)
    .describe(`the name visitors see (1 to ${MAX_NAME} characters); the connection's own name never appears`),
});

const group = z.strictObject({
  name: z.string().max(MAX_NAME).describe(`the group's heading (1 to ${MAX_NAME} characters)`),
  components: z
    .array(component)
    .min(1)
    .max(MAX_COMPONENTS)
    .describe("the group's components, in the order shown"),
});

const pageFields = {
  slug: z
    .string()
    .max(50)
    .describe(
      "the page's path, /status/{slug}: 3 to 50 lowercase letters, digits and hyphens, starting and ending with a " +
        "letter or digit, unique across Vigil and not a reserved word (api, v1, docs, …)",
    ),
  title: z.string().max(MAX_TITLE).describe(`the page's heading (1 to ${MAX_TITLE} characters)`),
  description: z
    .string()
    .max(MAX_DESCRIPTION)
    .nullable()
    .optional()
    .describe(`a paragraph under the title (at most ${MAX_DESCRIPTION} characters); null or absent for none`),
  show_response_times: z
    .boolean()
    .optional()
    .describe("whether visitors see response times (page, summary and a response-time badge); default false"),
  custom_domain: z
    .string()
    .max(253)
    .nullable()
    .optional()
    .describe(
      "a host name the page also answers on at / (status.example.com), for a reverse proxy that forwards the Host " +
        "header; unique across Vigil; null or absent for none",
    ),
  logo: z
    .string()
    .nullable()
    .optional()
    .describe(
      `a data URL of a PNG, JPEG, GIF, WebP or SVG image of at most ${MAX_LOGO_BYTES / 1024} KiB ` +
        '("data:image/png;base64,…"); null removes it; on PUT, absent keeps the current one',
    ),
  groups: z
    .array(group)
    .max(MAX_GROUPS)
    .describe(
      `the component groups, in the order shown (at most ${MAX_GROUPS}, ${MAX_COMPONENTS} components in all, a ` +
        "connection at most once per page)",
    ),
};

/** POST /v1/status-pages. */
export const createStatusPageBody = z.strictObject({
  ...pageFields,
  organization_id: uuid
    .optional()
    .describe(
      "the organization the page belongs to (its admins and owners manage it); absent: an organization key's own " +
        "organization, or a personal key's personal account",
    ),
});
export type CreateStatusPageBody = z.output<typeof createStatusPageBody>;

/** PUT /v1/status-pages/{id}: the page as a whole (the account stays). */
export const updateStatusPageBody = z.strictObject(pageFields);
export type UpdateStatusPageBody = z.output<typeof updateStatusPageBody>;

export const statusPageParams = z.strictObject({ id: uuid });
export const postParams = z.strictObject({ id: uuid, incident_id: uuid });

const postStatus = z
  .enum(POST_STATUSES, { error: `must be one of ${POST_STATUSES.join(", ")}` })
  .describe(POST_STATUSES.join(", "));
const message = z
  .string()
  .max(MAX_MESSAGE)
  .describe(`plain text shown to visitors (1 to ${MAX_MESSAGE} characters; HTML is shown as text)`);

/** POST /v1/status-pages/{id}/incidents. */
export const createPostBody = z.strictObject({
  title: z.string().max(MAX_POST_TITLE).describe(`the post's title (1 to ${MAX_POST_TITLE} characters)`),
  status: postStatus,
  message,
});
export type CreatePostBody = z.output<typeof createPostBody>;

/** POST /v1/status-pages/{id}/incidents/{incident_id}/updates. */
export const createUpdateBody = z.strictObject({ status: postStatus, message });
export type CreateUpdateBody = z.output<typeof createUpdateBody>;
