import type { z } from "zod";
import {
  bodyText,
  cut,
  facts,
  headline,
  JSON_HEADERS,
  links,
  readAnswer,
  secretsOf,
  settingsObject,
  toneOf,
  type Tone,
  urlHint,
  urlSetting,
  utf8Bytes,
} from "./text.js";
import type { ChannelAlert, Provider } from "./types.js";

/**
 * Microsoft Teams, through a Workflows ("Post to a channel when a webhook request is received")
 * webhook: one POST of a `message` with one Adaptive Card attachment
 * (https://learn.microsoft.com/en-us/microsoftteams/platform/webhooks-and-connectors/how-to/add-incoming-webhook).
 * The webhook URL carries its secret in the query (`sig=…`).
 *
 * The card is version 1.4 (the highest Teams renders from incoming webhooks on every client),
 * `$schema` http://adaptivecards.io/schemas/adaptive-card.json: a bold medium TextBlock title, a
 * TextBlock body, a FactSet, and Action.OpenUrl actions. Teams refuses a message over about
 * 28 KB ("Request Entity Too Large", 413); the whole JSON is kept under 26,000 bytes by cutting
 * the body. Answers: 202 Accepted (Workflows) or 200 (legacy connectors); 400 a malformed
 * card; 401/403/404 the workflow's URL is wrong, its signature invalid or the flow deleted
 * (refused `webhook_url`); 429 with Retry-After; 5xx.
 */

export const TEAMS_LIMITS = {
  /** Teams' documented message limit is 28 KB; this leaves room for the envelope Workflows add. */
  payloadBytes: 26_000,
  title: 500,
  factValue: 1000,
} as const;

export const teamsSettings = settingsObject({
  webhook_url: urlSetting("webhook_url", "the Teams Workflows webhook URL (…/workflows/…/invoke?…&sig=…)"),
});
export type TeamsSettings = z.output<typeof teamsSettings>;

/** Adaptive Card TextBlock colors per tone. */
const COLOR: Record<Tone, string> = {
  test: "Accent",
  resolved: "Good",
  acknowledged: "Accent",
  critical: "Attention",
  warning: "Warning",
  info: "Default",
};

function card(alert: ChannelAlert, body: string) {
  return {
    type: "message",
    attachments: [
      {
        contentType: "application/vnd.microsoft.card.adaptive",
        contentUrl: null,
        content: {
          $schema: "http://adaptivecards.io/schemas/adaptive-card.json",
          type: "AdaptiveCard",
          version: "1.4",
          body: [
            {
              type: "TextBlock",
              text: cut(headline(alert), TEAMS_LIMITS.title),
              weight: "Bolder",
              size: "Medium",
              color: COLOR[toneOf(alert)],
              wrap: true,
            },
            ...(body ? [{ type: "TextBlock", text: body, wrap: true }] : []),
            {
              type: "FactSet",
              facts: facts(alert).map((f) => ({
                title: f.name,
                value: cut(f.value, TEAMS_LIMITS.factValue),
              })),
            },
          ],
          actions: links(alert).map((l) => ({ type: "Action.OpenUrl", title: l.text, url: l.url })),
          msteams: { width: "Full" },
        },
      },
    ],
  };
}

export const teams: Provider<TeamsSettings> = {
  type: "teams",
  settings: teamsSettings,
  secretFields: ["webhook_url"],
  urlFields: ["webhook_url"],
  hint: (s) => urlHint(s.webhook_url),
  request(alert, s) {
    let body = bodyText(alert);
    let json = JSON.stringify(card(alert, body));
    // cut the body until the whole JSON fits: in proportion to what its characters weigh as
    // JSON (an emoji is 4 bytes, a line break 2, a control character 6)
    for (
      let bytes = utf8Bytes(json);
      bytes > TEAMS_LIMITS.payloadBytes && body.length > 0;
      bytes = utf8Bytes(json)
    ) {
      const bodyBytes = utf8Bytes(JSON.stringify(body));
      const keep = Math.max(0, bodyBytes - (bytes - TEAMS_LIMITS.payloadBytes) - 16);
      body = cut(body, Math.min(Math.floor((body.length * keep) / bodyBytes), body.length - 1));
      json = JSON.stringify(card(alert, body));
    }
    return { url: new URL(s.webhook_url), headers: { ...JSON_HEADERS }, body: json };
  },
  interpret(answer, s) {
    return readAnswer(answer, {
      credential: "webhook_url",
      secrets: secretsOf(s, ["webhook_url"]),
      refused: (a) => (a.status === 404 || a.status === 410 ? "webhook_url" : undefined),
    });
  },
};
