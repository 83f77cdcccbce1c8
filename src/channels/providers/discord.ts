import type { z } from "zod";
import {
  bodyText,
  cut,
  cutEscaped,
  facts,
  headline,
  JSON_HEADERS,
  links,
  mainLink,
  readAnswer,
  secondsToMs,
  jsonOf,
  secretsOf,
  settingsObject,
  TONE_EMOJI,
  toneOf,
  type Tone,
  urlHint,
  urlSetting,
} from "./text.js";
import type { Provider } from "./types.js";

/**
 * Discord, through a channel webhook (https://discord.com/developers/docs/resources/webhook#execute-webhook):
 * one POST of `{content, embeds: [one embed], allowed_mentions: {parse: []}}` to the webhook URL
 * with `?wait=true` added (the rest of the URL kept as is, e.g. a `thread_id`), so Discord
 * answers the created message, or the error, instead of an empty 204. The URL's last segment is
 * the webhook's token.
 *
 * Limits (https://discord.com/developers/docs/resources/message#embed-object-embed-limits):
 * content at most 2000 characters; an embed's title at most 256, description 4096, at most 25
 * fields of name 256 and value 1024, footer text 2048; all of an embed's title, description,
 * field names and values, footer and author name together at most 6000. `allowed_mentions`
 * with an empty `parse` keeps `@everyone`, `@here` and `<@id>` in an alert's text from pinging
 * anyone; Markdown characters in the text are escaped with a backslash (Discord renders `\*` as
 * `*`), so an alert's text cannot format, mask a link or quote.
 *
 * Answers: 200 with the message (wait=true); 400 `{"message": "Invalid Form Body", "code":
 * 50035, "errors": …}`; 401 `Invalid Webhook Token` (50027), 404 `Unknown Webhook` (10015):
 * refused `webhook_url`; 429 `{"retry_after": 1.5, …}` with Retry-After; 5xx.
 */

export const DISCORD_LIMITS = {
  content: 2000,
  title: 256,
  description: 4096,
  fields: 25,
  fieldName: 256,
  fieldValue: 1024,
  footer: 2048,
  embedTotal: 6000,
} as const;

export const discordSettings = settingsObject({
  webhook_url: urlSetting(
    "webhook_url",
    "the Discord webhook URL (https://discord.com/api/webhooks/<id>/<token>)",
  ),
});
export type DiscordSettings = z.output<typeof discordSettings>;

/** Embed colors per tone (integers, 0xRRGGBB). */
export const DISCORD_COLOR: Record<Tone, number> = {
  test: 0x5865f2,
  resolved: 0x2eb67d,
  acknowledged: 0xecb22e,
  critical: 0xe01e5a,
  warning: 0xf2994a,
  info: 0x3b82f6,
};

/**
 * Discord Markdown escaped with a backslash: `\ * _ ~ ` | > # [ ] ( ) <` are shown as typed (no
 * bold, spoiler, quote, heading, masked link, `<@id>` or `<t:…>` from an alert's text).
 */
export const escapeDiscord = (s: string): string => s.replace(/[\\*_~`|>#[\]()<]/g, (c) => `\\${c}`);

/** `webhook_url` with `wait=true` in its query, everything else of it as it was. */
export function waitUrl(webhookUrl: string): URL {
  const u = new URL(webhookUrl);
  if (u.searchParams.has("wait")) {
    u.searchParams.set("wait", "true");
    return u;
  }
  u.search = u.search && u.search !== "?" ? `${u.search}&wait=true` : "?wait=true";
  return u;
}

/** A URL made safe inside a Markdown link's parentheses. */
const linkTarget = (url: string) => url.replace(/[()\s<>]/g, (c) => encodeURIComponent(c));

export const discord: Provider<DiscordSettings> = {
  type: "discord",
  settings: discordSettings,
  secretFields: ["webhook_url"],
  urlFields: ["webhook_url"],
  hint: (s) => urlHint(s.webhook_url),
  request(alert, s) {
    const tone = toneOf(alert);
    const title = cut(`${TONE_EMOJI[tone]} ${headline(alert)}`, DISCORD_LIMITS.title);
    const footer = cut(`Vigil · ${alert.kind} · alert ${alert.id}`, DISCORD_LIMITS.footer);
    const fields = facts(alert).map((f) => ({
      name: cut(f.name, DISCORD_LIMITS.fieldName),
      value: cutEscaped(f.value, DISCORD_LIMITS.fieldValue, escapeDiscord) || "-",
      inline: true,
    }));
    const linkLine = links(alert)
      .map((l) => `[${l.text}](${linkTarget(l.url)})`)
      .join(" · ");
    if (linkLine.length <= DISCORD_LIMITS.fieldValue)
      fields.push({ name: "Links", value: linkLine, inline: false });
    const used =
      title.length + footer.length + fields.reduce((n, f) => n + f.name.length + f.value.length, 0);
    const room = Math.min(DISCORD_LIMITS.description, DISCORD_LIMITS.embedTotal - used);
    const description = cutEscaped(bodyText(alert), Math.max(0, room), escapeDiscord);
    const embed = {
      title,
      ...(description ? { description } : {}),
      url: mainLink(alert),
      color: DISCORD_COLOR[tone],
      fields: fields.slice(0, DISCORD_LIMITS.fields),
      timestamp: alert.createdAt.toISOString(),
      footer: { text: footer },
    };
    const payload = {
      content: cutEscaped(headline(alert), DISCORD_LIMITS.content, escapeDiscord),
      embeds: [embed],
      allowed_mentions: { parse: [] },
    };
    return { url: waitUrl(s.webhook_url), headers: { ...JSON_HEADERS }, body: JSON.stringify(payload) };
  },
  interpret(answer, s) {
    return readAnswer(answer, {
      credential: "webhook_url",
      secrets: secretsOf(s, ["webhook_url"]),
      // 404 Unknown Webhook: deleted, or the id or token is wrong
      refused: (a) => (a.status === 404 ? "webhook_url" : undefined),
      retryAfter: (a) => {
        const j = jsonOf(a.body) as { retry_after?: unknown } | undefined;
        return secondsToMs(j?.retry_after);
      },
    });
  },
};
