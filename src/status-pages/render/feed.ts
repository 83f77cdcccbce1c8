import { Feed } from "feed";
import type { PublicPost, PublicSnapshot } from "../public-model.js";
import { escapeHtml, xmlSafe } from "./escape.js";
import { feedPath, postAnchor } from "./summary.js";
import { POST_STATUS_WORDS, utcTime } from "./words.js";

/**
 * The page's incident posts as an Atom 1.0 feed (`{prefix}/feed.atom`), by the `feed` package.
 *
 * How `feed` writes what it is given, and so what is done here first:
 * - an entry's title and content go into CDATA as `type="html"`: member text is HTML-escaped
 *   before it is put there, so a reader shows `<script>` as text and the CDATA cannot be closed
 *   early (`]]>` becomes `]]&gt;`);
 * - the feed's title and author are text elements, which `feed` escapes, but it first turns
 *   `&amp;` back into `&` (against double escaping), losing a literal "&amp;" a member typed;
 *   turning every `&` into `&amp;` here first keeps the text as written;
 * - characters XML does not allow are removed everywhere (xmlSafe).
 */

const feedText = (text: string) => xmlSafe(text).replace(/&/g, "&amp;");
const html = (text: string) => escapeHtml(xmlSafe(text));

/** `[Resolved] Title` (the title escaped as HTML, as `type="html"` wants). */
const entryTitle = (p: PublicPost) => html(`[${POST_STATUS_WORDS[p.status]}] ${p.title}`);

/** Every update, newest first: its status, its time, its message with line breaks kept. */
function entryContent(p: PublicPost, now: string): string {
  return p.updates
    .map(
      (u) =>
        `<p><strong>${POST_STATUS_WORDS[u.status]}</strong> · ` +
        `<time datetime="${html(u.at)}">${utcTime(u.at, now)}</time><br>` +
        `${html(u.message).replace(/\r\n|\r|\n/g, "<br>")}</p>`,
    )
    .join("\n");
}

/** The feed of a snapshot: its active and past posts, the last updated first. */
export function renderAtomFeed(s: PublicSnapshot): string {
  const posts = [...s.activePosts, ...s.pastPosts].sort((a, b) => b.updatedAt.localeCompare(a.updatedAt));
  const updated = posts[0]?.updatedAt ?? s.generatedAt;
  const feed = new Feed({
    id: s.canonicalUrl,
    link: s.canonicalUrl,
    feedLinks: { atom: feedPath(s.canonicalUrl) },
    title: feedText(`${s.title} status`),
    ...(s.description ? { description: feedText(s.description) } : {}),
    // Atom wants an author on the feed or on every entry: the page speaks for the organization
    author: { name: feedText(s.title) },
    updated: new Date(updated),
    generator: "Vigil",
  });
  for (const p of posts) {
    const link = `${s.canonicalUrl}#${postAnchor(p.id)}`;
    feed.addItem({
      id: link,
      link,
      title: entryTitle(p),
      date: new Date(p.updatedAt),
      published: new Date(p.createdAt),
      content: entryContent(p, s.generatedAt),
    });
  }
  return feed.atom1();
}
