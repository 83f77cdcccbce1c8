import { z } from "zod";
import {
  bodyText,
  cut,
  cutBytes,
  facts,
  headline,
  lastChars,
  mainLink,
  readAnswer,
  secretsOf,
  settingsObject,
  toneOf,
  type Tone,
  urlSetting,
  utf8Bytes,
} from "./text.js";
import type { ChannelAlert, Provider } from "./types.js";

/**
 * ntfy (https://docs.ntfy.sh/publish/): one POST of the message as text/plain to the topic's URL
 * (ntfy.sh or a self-hosted server). Anyone who knows a topic's name can read it, so the whole
 * `topic_url` is a secret, as is the optional access `token` (sent as `Authorization: Bearer`).
 *
 * Headers: `Title` (the headline; ntfy takes UTF-8 headers, but not every HTTP stack sends them,
 * so a non-ASCII title goes as RFC 2047 encoded-words, `=?UTF-8?B?…?=`, which ntfy decodes:
 * docs.ntfy.sh/publish/#list-of-all-parameters), `Priority` (1 min … 5 max), `Tags` (an emoji
 * shortcode per tone, e.g. `rotating_light`, `white_check_mark`, then `vigil` and the kind),
 * `Click` (the incident's page, else the connection's, else the dashboard).
 *
 * Priority: a critical trigger (a failure, an escalation) goes at the channel's `priority`
 * (default 4, "high": a phone buzzes longer); everything else (warnings, info, recoveries,
 * acknowledgements, tests) at most 3, ntfy's default, so a recovery is never louder than the
 * failure it ends.
 *
 * The message is cut at 4096 bytes: ntfy turns a longer one into an attachment (the
 * notification would then show no text).
 *
 * Answers: 200 with the message as JSON; errors `{"code":40101,"http":401,"error":"unauthorized",
 * "link":…}`: 401/403 refused `token` (a protected topic needs one, or this one cannot write),
 * 404 refused `topic_url`, 400/413 given up; 429 and 5xx (507 out of storage) retried.
 */

export const NTFY_LIMITS = {
  /** ntfy's message limit; longer messages become attachments. */
  messageBytes: 4096,
  title: 200,
} as const;

export const NTFY_DEFAULT_PRIORITY = 4;

const TOPIC_URL =
  "topic_url must be the topic's URL, e.g. https://ntfy.sh/<topic>: absolute http(s), the topic (1-64 of " +
  "A-Z a-z 0-9 _ -) as its last path segment, without a user name or password";

export const ntfySettings = settingsObject({
  topic_url: urlSetting("topic_url", "the ntfy topic URL (https://ntfy.sh/<topic>)").refine(
    (v) => {
      try {
        const segments = new URL(v).pathname.split("/").filter(Boolean);
        return /^[-_A-Za-z0-9]{1,64}$/.test(segments.at(-1) ?? "");
      } catch {
        return false;
      }
    },
    { error: TOPIC_URL },
  ),
  token: z
    .string({ error: "token must be an ntfy access token (tk_…)" })
    .min(1, { error: "token must not be empty: leave it out for a topic without access control" })
    .max(512, { error: "token must be at most 512 characters" })
    .regex(/^[\x21-\x7e]+$/, {
      error: "token must be an ntfy access token (tk_…): printable ASCII, no spaces",
    })
    .optional(),
  priority: z
    .number({ error: "priority must be an integer from 1 (min) to 5 (max); 4 when left out" })
    .int({ error: "priority must be an integer from 1 (min) to 5 (max)" })
    .min(1, { error: "priority must be from 1 (min) to 5 (max)" })
    .max(5, { error: "priority must be from 1 (min) to 5 (max)" })
    .optional(),
});
export type NtfySettings = z.output<typeof ntfySettings>;

/** Emoji shortcodes (docs.ntfy.sh/emojis) per tone: the notification's icon. */
const TAG: Record<Tone, string> = {
  test: "test_tube",
  resolved: "white_check_mark",
  acknowledged: "eyes",
  critical: "rotating_light",
  warning: "warning",
  info: "information_source",
};

/** ntfy's priority of an alert: the channel's for a critical trigger, at most 3 otherwise. */
export function ntfyPriority(alert: ChannelAlert, configured = NTFY_DEFAULT_PRIORITY): number {
  const tone = toneOf(alert);
  return tone === "critical" ? configured : Math.min(configured, 3);
}

/** Bytes of text per RFC 2047 encoded-word: 45 bytes are 60 base64 characters, 72 with `=?UTF-8?B?…?=` (≤ 75). */
const WORD_BYTES = 45;

/**
 * A header value as ASCII: as is when printable ASCII (and not itself shaped like an
 * encoded-word), else RFC 2047 `B` encoded-words of whole characters, separated by spaces
 * (white space between adjacent encoded-words is not part of the text: RFC 2047 §6.2).
 */
export function encodeHeader(value: string): string {
  if (/^[\x20-\x7e]*$/.test(value) && !value.includes("=?")) return value;
  const words: string[] = [];
  let chunk = "";
  for (const ch of value) {
    if (utf8Bytes(chunk + ch) > WORD_BYTES) {
      words.push(chunk);
      chunk = "";
    }
    chunk += ch;
  }
  if (chunk) words.push(chunk);
  return words.map((w) => `=?UTF-8?B?${Buffer.from(w, "utf8").toString("base64")}?=`).join(" ");
}

/** The message: the body, then the facts; the body cut so the whole is at most 4096 bytes. */
export function ntfyMessage(alert: ChannelAlert): string {
  const tail = facts(alert)
    .map((f) => `${f.name}: ${f.value}`)
    .join("\n");
  const tailBytes = utf8Bytes(tail);
  if (tailBytes + 2 > NTFY_LIMITS.messageBytes) return cutBytes(tail, NTFY_LIMITS.messageBytes);
  const body = cutBytes(bodyText(alert), NTFY_LIMITS.messageBytes - tailBytes - 2);
  return body ? `${body}\n\n${tail}` : tail || headline(alert);
}

function asciiUrl(url: string): string | undefined {
  try {
    return new URL(url).href;
  } catch {
    return undefined;
  }
}

export const ntfy: Provider<NtfySettings> = {
  type: "ntfy",
  settings: ntfySettings,
  secretFields: ["topic_url", "token"],
  urlFields: ["topic_url"],
  hint: (s) => {
    try {
      const u = new URL(s.topic_url);
      const topic = u.pathname.replace(/\/+$/, "");
      return `${u.host}/${lastChars(topic, 2)}`;
    } catch {
      return "…";
    }
  },
  request(alert, s) {
    const tone = toneOf(alert);
    const tags = [TAG[tone], "vigil", alert.kind.replace(/[^a-z0-9_-]/gi, "")].filter(Boolean);
    const click = asciiUrl(mainLink(alert));
    const headers: Record<string, string> = {
      "content-type": "text/plain; charset=utf-8",
      "user-agent": "Vigil",
      title: encodeHeader(cut(headline(alert), NTFY_LIMITS.title)),
      priority: String(ntfyPriority(alert, s.priority ?? NTFY_DEFAULT_PRIORITY)),
      tags: tags.join(","),
      ...(click ? { click } : {}),
      ...(s.token ? { authorization: `Bearer ${s.token}` } : {}),
    };
    return { url: new URL(s.topic_url), headers, body: ntfyMessage(alert) };
  },
  interpret(answer, s) {
    return readAnswer(answer, {
      credential: "token",
      secrets: secretsOf(s, ["topic_url", "token"]),
      refused: (a) => (a.status === 404 ? "topic_url" : undefined),
    });
  },
};
