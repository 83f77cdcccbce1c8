/**
 * Escaping for the public renderings: every text in a snapshot that a member wrote (titles,
 * descriptions, display names, messages) passes through one of these before it meets markup.
 */

const HTML_ESCAPES: Record<string, string> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&#39;",
};

/** Text as HTML (element content or a quoted attribute value). */
export const escapeHtml = (text: string): string => text.replace(/[&<>"']/g, (c) => HTML_ESCAPES[c] ?? c);

/**
 * Text with the characters XML 1.0 does not allow removed (C0 controls other than tab and line
 * breaks, U+FFFE/U+FFFF, lone surrogates): one of them in a member's message would make the whole
 * feed or badge unparsable. HTML tolerates them, XML does not.
 */
export const xmlSafe = (text: string): string =>
  text.replace(
    // eslint-disable-next-line no-control-regex
    /[\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g,
    "",
  );
