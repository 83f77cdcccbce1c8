import { z } from "zod";
import {
  apiUrl,
  baseUrlSetting,
  bodyText,
  cut,
  dedupKey,
  headline,
  JSON_HEADERS,
  lastChars,
  links,
  oneLine,
  readAnswer,
  secretsOf,
  settingsObject,
} from "./text.js";
import type { ChannelAlert, Provider } from "./types.js";

/**
 * PagerDuty, through the Events API v2 (https://developer.pagerduty.com/docs/events-api-v2/trigger-events/,
 * OpenAPI: github.com/PagerDuty/api-schema reference/events-v2/openapiv3.json): one POST of an
 * event to `${api_url}/v2/enqueue`, the integration's routing key in the body.
 *
 * `event_action` is `trigger` (open or re-notify the incident), `acknowledge` or `resolve`; an
 * `info` event is a trigger of its own (severity `info`, keyed by the alert's id). `dedup_key`
 * (at most 255 characters) is `vigil-incident-<incidentId>`, so trigger, acknowledge and resolve
 * meet on the same PagerDuty alert, else `vigil-<alert id>`. Only a trigger carries the
 * `payload` (summary at most 1024 characters, source, severity critical|error|warning|info,
 * timestamp, component, group, class, custom_details), `links`, `client` and `client_url`: the
 * API reads them only on triggers. A test send is a trigger of severity `info` (PagerDuty opens
 * an alert for it: that is what a test of a paging channel shows).
 *
 * Answers: 202 `{"status":"success","message":"Event processed","dedup_key":…}`; 400
 * `{"status":"invalid event","message":"Event object is invalid","errors":[…]}`: given up, and a
 * wrong key (`Length of 'routing_key' is incorrect`, `Invalid routing key`) is refused
 * `routing_key`; 404 (an unknown integration, seen on some accounts), 401 and 403 are refused
 * `routing_key` too; 429 retried (Retry-After when given, else the back-off); 5xx retried.
 */

export const PAGERDUTY_LIMITS = {
  summary: 1024,
  dedupKey: 255,
  /** Fields we send as free text: kept well inside the API's 512 KB event. */
  details: 16_000,
  source: 255,
} as const;

export const PAGERDUTY_API = "https://events.pagerduty.com";

export const pagerdutySettings = settingsObject({
  routing_key: z
    .string({
      error:
        "routing_key must be the integration key of an Events API v2 integration (32 letters and digits)",
    })
    .regex(/^[a-zA-Z0-9]{32}$/, {
      error:
        "routing_key must be the 32-character integration key (letters and digits) of an Events API v2 " +
        "integration: Service → Integrations → Events API V2 → Integration Key",
    }),
  api_url: baseUrlSetting("api_url", PAGERDUTY_API).optional(),
});
export type PagerdutySettings = z.output<typeof pagerdutySettings>;

const SEVERITY = { critical: "critical", warning: "warning", info: "info" } as const;

function payloadOf(alert: ChannelAlert) {
  const details: Record<string, string> = {};
  const body = bodyText(alert);
  if (body) details.body = cut(body, PAGERDUTY_LIMITS.details);
  details.kind = alert.kind;
  if (alert.connectionName) details.connection = oneLine(alert.connectionName);
  if (alert.connectionId) details.connection_id = alert.connectionId;
  if (alert.incidentId) details.incident_id = alert.incidentId;
  if (alert.incidentKind) details.incident_kind = alert.incidentKind;
  details.alert_id = alert.id;
  return {
    summary: cut(headline(alert), PAGERDUTY_LIMITS.summary),
    source: cut(
      oneLine(alert.connectionName ?? alert.connectionId ?? "") || "Vigil",
      PAGERDUTY_LIMITS.source,
    ),
    severity: alert.kind === "test" || alert.event === "info" ? "info" : SEVERITY[alert.severity],
    timestamp: alert.createdAt.toISOString(),
    ...(alert.incidentKind ? { component: alert.incidentKind } : {}),
    ...(alert.connectionId ? { group: alert.connectionId } : {}),
    class: alert.kind,
    custom_details: details,
  };
}

export const pagerduty: Provider<PagerdutySettings> = {
  type: "pagerduty",
  settings: pagerdutySettings,
  secretFields: ["routing_key"],
  urlFields: ["api_url"],
  hint: (s) => `routing key ${lastChars(s.routing_key)}`,
  request(alert, s) {
    const action = alert.event === "info" ? "trigger" : alert.event;
    const event =
      action === "trigger"
        ? {
            routing_key: s.routing_key,
            event_action: action,
            dedup_key: cut(dedupKey(alert), PAGERDUTY_LIMITS.dedupKey),
            payload: payloadOf(alert),
            links: links(alert).map((l) => ({ href: l.url, text: l.text })),
            client: "Vigil",
            client_url: alert.links.dashboard,
          }
        : {
            routing_key: s.routing_key,
            event_action: action,
            dedup_key: cut(dedupKey(alert), PAGERDUTY_LIMITS.dedupKey),
          };
    return {
      url: apiUrl(s.api_url ?? PAGERDUTY_API, "/v2/enqueue"),
      headers: { ...JSON_HEADERS },
      body: JSON.stringify(event),
    };
  },
  interpret(answer, s) {
    return readAnswer(answer, {
      credential: "routing_key",
      secrets: secretsOf(s, ["routing_key"]),
      refused: (a, message) =>
        a.status === 404 || (a.status === 400 && /routing[ _]key|integration key|service key/i.test(message))
          ? "routing_key"
          : undefined,
    });
  },
};
