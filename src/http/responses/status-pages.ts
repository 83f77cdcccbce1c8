import { z } from "zod";
import { POST_STATUSES } from "../../status-pages/public-model.js";
import { MAX_PAGES_PER_ACCOUNT } from "../../status-pages/schema.js";
import { timestamp } from "./common.js";

/** A status page as members see it (docs/status-pages.md): it names the connections behind each component. */
export const statusPage = z.object({
  id: z.string(),
  organization_id: z
    .string()
    .nullable()
    .describe("the organization the page belongs to; null for a personal page"),
  slug: z.string().describe("visitors read the page at /status/{slug}"),
  title: z.string(),
  description: z.string().nullable(),
  show_response_times: z.boolean(),
  custom_domain: z.string().nullable().describe("the host name the page also answers on; null for none"),
  logo: z
    .object({
      content_type: z.string(),
      bytes: z.number().int(),
      url: z.string().describe("the public URL of the logo (its hash in `v`)"),
    })
    .nullable(),
  url: z
    .string()
    .describe("where visitors read the page: https://{custom_domain}, else PUBLIC_URL/status/{slug}"),
  groups: z.array(
    z.object({
      name: z.string(),
      components: z.array(
        z.object({
          connection_id: z.string().describe("the connection behind the component (never shown to visitors)"),
          display_name: z.string().describe("the name visitors see"),
          key: z
            .string()
            .describe(
              "the component's public id in badge URLs; it stays while the connection stays on the page",
            ),
          badge_url: z.string().describe("its status badge (SVG); see docs/status-pages.md for the others"),
        }),
      ),
    }),
  ),
  created_at: timestamp,
  updated_at: timestamp.describe("the page's last change (its posts included)"),
});

export const statusPageList = z.object({
  status_pages: z
    .array(statusPage)
    .describe(
      `the pages the key sees, oldest first: its personal ones and its organizations' (at most ${MAX_PAGES_PER_ACCOUNT} per account)`,
    ),
});

export const statusPageDeleted = z.object({ id: z.string(), deleted: z.literal(true) });

const postStatus = z.enum(POST_STATUSES);

/** A public incident post. */
export const statusPagePost = z.object({
  id: z.string(),
  status_page_id: z.string(),
  title: z.string(),
  status: postStatus.describe("the latest update's status"),
  created_at: timestamp,
  updated_at: timestamp.describe("the latest update's time"),
  resolved_at: timestamp.nullable().describe("when an update resolved it; null while it is not resolved"),
  updates: z
    .array(z.object({ id: z.string(), status: postStatus, message: z.string(), created_at: timestamp }))
    .describe("newest first; the last is the opening message"),
});

export const statusPagePostList = z.object({
  incidents: z.array(statusPagePost).describe("the page's posts, newest first (at most 200)"),
});

export const statusPagePostDeleted = z.object({ id: z.string(), deleted: z.literal(true) });
