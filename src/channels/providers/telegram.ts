import { z } from "zod";
import {
  apiUrl,
  baseUrlSetting,
  bodyText,
  cut,
  escapeHtml,
  facts,
  headline,
  jsonOf,
  JSON_HEADERS,
  links,
  oneLine,
  readAnswer,
  scrub,
  secondsToMs,
  secretsOf,
  settingsObject,
  TONE_EMOJI,
  toneOf,
} from "./text.js";
import type { ChannelAlert, Provider, ProviderAnswer } from "./types.js";

/**
 * Telegram, through the Bot API (https://core.telegram.org/bots/api#sendmessage): one POST of
 * `{chat_id, text, parse_mode: "HTML", link_preview_options: {is_disabled: true}}` to
 * `${api_url}/bot<bot_token>/sendMessage`. The URL holds the token: no error text is ever built
 * from it, and the token is scrubbed from whatever Telegram answers.
 *
 * `text` is at most 4096 characters after entity parsing (Telegram counts UTF-16 code units of
 * the visible text: tags do not count, `&lt;` counts as one). HTML parse mode
 * (https://core.telegram.org/bots/api#html-style): every `<`, `>`, `&` and `"` of an alert's
 * text is an entity, so only Vigil's own `<b>` and `<a href>` are tags.
 *
 * Answers: 200 `{"ok":true,"result":{…the message}}`; 400 `{"ok":false,"error_code":400,
 * "description":"Bad Request: chat not found"}` (refused `chat_id`; also a group upgraded to a
 * supergroup, whose new id is in `parameters.migrate_to_chat_id`); 401 `Unauthorized` and 404
 * `Not Found` (a wrong token: refused `bot_token`); 403 `Forbidden: bot was blocked by the user`
 * or `bot is not a member of the channel chat` (refused `chat_id`); 429 `Too Many Requests:
 * retry after N` with `parameters.retry_after` in seconds; 5xx retried.
 */

export const TELEGRAM_LIMITS = {
  /** Characters (UTF-16 code units) of the text after entity parsing. */
  text: 4096,
  title: 512,
} as const;

export const TELEGRAM_API = "https://api.telegram.org";

const CHAT_ID =
  "chat_id must be the chat's numeric id (e.g. 123456789, or -1001234567890 for a group or channel) " +
  "or a public channel's @username";

export const telegramSettings = settingsObject({
  bot_token: z
    .string({ error: "bot_token must be the bot's token from @BotFather, like 123456:ABC-DEF…" })
    .regex(/^\d+:[A-Za-z0-9_-]{30,}$/, {
      error:
        "bot_token must be the bot's token from @BotFather: digits, a colon, then at least 30 of A-Z a-z 0-9 _ -",
    }),
  chat_id: z.union(
    [
      z.number({ error: CHAT_ID }).int({ error: CHAT_ID }),
      z.string({ error: CHAT_ID }).regex(/^(-?\d{1,20}|@[A-Za-z0-9_]{4,32})$/, { error: CHAT_ID }),
    ],
    { error: CHAT_ID },
  ),
  api_url: baseUrlSetting("api_url", TELEGRAM_API).optional(),
});
export type TelegramSettings = z.output<typeof telegramSettings>;

/** The message's HTML: the bold headline, the body, the facts, the links; within 4096 visible characters. */
export function telegramText(alert: ChannelAlert): string {
  const title = cut(`${TONE_EMOJI[toneOf(alert)]} ${headline(alert)}`, TELEGRAM_LIMITS.title);
  const factLines = facts(alert).map((f) => ({
    html: `<b>${escapeHtml(f.name)}:</b> ${escapeHtml(f.value)}`,
    visible: `${f.name}: ${f.value}`,
  }));
  const linkParts = links(alert).map((l) => ({
    html: `<a href="${escapeHtml(l.url)}">${escapeHtml(l.text)}</a>`,
    visible: l.text,
  }));
  const tail = [...factLines.map((f) => f.visible), linkParts.map((l) => l.visible).join(" · ")].join("\n");
  const tailHtml = [...factLines.map((f) => f.html), linkParts.map((l) => l.html).join(" · ")].join("\n");
  // visible: title, a blank line, the body, a blank line, the tail
  const room = TELEGRAM_LIMITS.text - title.length - tail.length - 4;
  const body = cut(bodyText(alert), Math.max(0, room));
  return [`<b>${escapeHtml(title)}</b>`, ...(body ? [escapeHtml(body)] : []), tailHtml].join("\n\n");
}

interface TelegramAnswer {
  ok?: boolean;
  description?: unknown;
  parameters?: { retry_after?: unknown; migrate_to_chat_id?: unknown };
}
const answerOf = (a: ProviderAnswer) => (jsonOf(a.body) ?? {}) as TelegramAnswer;

export const telegram: Provider<TelegramSettings> = {
  type: "telegram",
  settings: telegramSettings,
  secretFields: ["bot_token"],
  urlFields: ["api_url"],
  hint: (s) => `chat ${String(s.chat_id)}`,
  request(alert, s) {
    const message = {
      chat_id: s.chat_id,
      text: telegramText(alert),
      parse_mode: "HTML",
      link_preview_options: { is_disabled: true },
    };
    return {
      url: apiUrl(s.api_url ?? TELEGRAM_API, `/bot${s.bot_token}/sendMessage`),
      headers: { ...JSON_HEADERS },
      body: JSON.stringify(message),
    };
  },
  interpret(answer, s) {
    // the token's secret half too (Telegram names the bot by the part before the colon)
    const secrets = [...secretsOf(s, ["bot_token"]), s.bot_token.slice(s.bot_token.indexOf(":") + 1)];
    const j = answerOf(answer);
    if (answer.status >= 200 && answer.status < 300 && j.ok === false) {
      // not seen in practice, but `ok: false` is Telegram's word for a failure whatever the status
      const said = typeof j.description === "string" ? cut(oneLine(scrub(j.description, secrets)), 200) : "";
      return { error: `HTTP ${answer.status}: ${said || "ok: false"}`, giveUp: true };
    }
    return readAnswer(answer, {
      credential: "bot_token",
      secrets,
      message: (a) => {
        const d = answerOf(a).description;
        if (typeof d !== "string") return undefined;
        const moved = answerOf(a).parameters?.migrate_to_chat_id;
        return typeof moved === "number"
          ? `${d} (the group is now the supergroup ${moved}: set chat_id to it)`
          : d;
      },
      refused: (a, message) => {
        if (a.status === 401 || a.status === 404) return "bot_token";
        if (a.status === 403) return "chat_id";
        if (
          a.status === 400 &&
          /chat not found|chat_id|user not found|peer_id_invalid|upgraded to a supergroup/i.test(message)
        )
          return "chat_id";
        return undefined;
      },
      retryAfter: (a) => secondsToMs(answerOf(a).parameters?.retry_after),
    });
  },
};
