import type { z } from "zod";
import {
  cut,
  cutEscaped,
  facts,
  headline,
  JSON_HEADERS,
  links,
  readAnswer,
  secretsOf,
  settingsObject,
  TONE_EMOJI,
  toneOf,
  bodyText,
  urlHint,
  urlSetting,
} from "./text.js";
import type { Provider } from "./types.js";

/**
 * Slack, through an incoming webhook (https://docs.slack.dev/messaging/sending-messages-using-incoming-webhooks):
 * one POST of `{text, blocks}` to the webhook URL, whose path is the secret.
 *
 * Block Kit limits (https://docs.slack.dev/reference/block-kit/blocks): at most 50 blocks a
 * message; a header's plain_text at most 150 characters; a section's text at most 3000, its
 * fields at most 10 of at most 2000 each; an actions block at most 25 elements; a button's text
 * at most 75, its url at most 3000, its action_id at most 255 and unique in the message.
 * mrkdwn text escapes `&`, `<` and `>` (so no `<!channel>` or `<@U…>` in an alert's text can
 * mention anyone); Slack counts the escaped text. The `text` is the notification's fallback.
 *
 * Answers (https://api.slack.com/changelog/2016-05-17-changes-to-errors-for-incoming-webhooks):
 * 200 `ok`; 400 `invalid_payload`; 403 `action_prohibited`/`invalid_token`; 404 `no_service`
 * or `channel_not_found` and 410 `channel_is_archived` (the webhook is gone: refused
 * `webhook_url`); 429 with Retry-After; 500 `rollup_error`.
 */

export const SLACK_LIMITS = {
  blocks: 50,
  headerText: 150,
  sectionText: 3000,
  fields: 10,
  fieldText: 2000,
  actionsElements: 25,
  buttonText: 75,
  buttonUrl: 3000,
  actionId: 255,
  /** Slack truncates a message's `text` beyond 40,000 characters and advises at most 4,000. */
  text: 4000,
} as const;

export const slackSettings = settingsObject({
  webhook_url: urlSetting(
    "webhook_url",
    "the Slack incoming webhook URL (https://hooks.slack.com/services/…)",
  ),
});
export type SlackSettings = z.output<typeof slackSettings>;

const SLACK_ESCAPES: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;" };
/** Slack's escaping for mrkdwn (https://docs.slack.dev/messaging/formatting-message-text#escaping). */
export const escapeSlack = (s: string): string => s.replace(/[&<>]/g, (c) => SLACK_ESCAPES[c] ?? c);

export const slack: Provider<SlackSettings> = {
  type: "slack",
  settings: slackSettings,
  secretFields: ["webhook_url"],
  urlFields: ["webhook_url"],
  hint: (s) => urlHint(s.webhook_url),
  request(alert, s) {
    const title = `${TONE_EMOJI[toneOf(alert)]} ${headline(alert)}`;
    const body = bodyText(alert) || "(no details)";
    const blocks: Record<string, unknown>[] = [
      {
        type: "header",
        text: { type: "plain_text", text: cut(title, SLACK_LIMITS.headerText), emoji: true },
      },
      {
        type: "section",
        text: { type: "mrkdwn", text: cutEscaped(body, SLACK_LIMITS.sectionText, escapeSlack) },
      },
    ];
    const fields = facts(alert)
      .slice(0, SLACK_LIMITS.fields)
      .map((f) => ({
        type: "mrkdwn",
        text: cutEscaped(`*${f.name}*\n${f.value}`, SLACK_LIMITS.fieldText, escapeSlack),
      }));
    if (fields.length) blocks.push({ type: "section", fields });
    const buttons = links(alert)
      .filter((l) => l.url.length <= SLACK_LIMITS.buttonUrl)
      .slice(0, SLACK_LIMITS.actionsElements)
      .map((l) => ({
        type: "button",
        text: { type: "plain_text", text: cut(l.text, SLACK_LIMITS.buttonText) },
        url: l.url,
        action_id: `vigil-open-${l.key}`,
      }));
    if (buttons.length) blocks.push({ type: "actions", elements: buttons });
    const payload = {
      text: cutEscaped(title, SLACK_LIMITS.text, escapeSlack),
      blocks: blocks.slice(0, SLACK_LIMITS.blocks),
    };
    return { url: new URL(s.webhook_url), headers: { ...JSON_HEADERS }, body: JSON.stringify(payload) };
  },
  interpret(answer, s) {
    return readAnswer(answer, {
      credential: "webhook_url",
      secrets: secretsOf(s, ["webhook_url"]),
      // 404 no_service / channel_not_found, 410 channel_is_archived: the webhook no longer posts
      refused: (a) => (a.status === 404 || a.status === 410 ? "webhook_url" : undefined),
    });
  },
};
