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
  toneOf,
} from "./text.js";
import type { ChannelAlert, Provider } from "./types.js";

/**
 * Opsgenie, through the Alert API (https://docs.opsgenie.com/docs/alert-api), authenticated by
 * an API integration's key: `Authorization: GenieKey <api_key>`.
 *
 * - trigger / info: create, POST `${api_url}/v2/alerts` with message (at most 130 characters),
 *   alias (at most 512: `vigil-incident-<incidentId>`, else `vigil-<alert id>`; Opsgenie
 *   de-duplicates an open alert with the same alias), description (at most 15,000), details (a
 *   map of strings), entity (at most 512), source `Vigil` (at most 100), priority P1 (critical)
 *   P3 (warning) P5 (info, tests), tags (at most 20 of at most 50 characters);
 * - acknowledge: POST `…/v2/alerts/<alias>/acknowledge?identifierType=alias` `{source, user, note}`;
 * - resolve: POST `…/v2/alerts/<alias>/close?identifierType=alias` `{source, user, note}`
 *   (note at most 25,000, user at most 100).
 *
 * Limits: https://docs.opsgenie.com/docs/alerts-and-alert-fields. `api_url` is
 * https://api.opsgenie.com, or https://api.eu.opsgenie.com for an EU account.
 *
 * Answers: 202 `{"result":"Request will be processed","took":…,"requestId":…}` (the API is
 * asynchronous); 401/403 a wrong or under-privileged key (refused `api_key`); 400/404/422 given
 * up (`{"message": …, "errors": {…}}`); 429 and 5xx retried.
 */

export const OPSGENIE_LIMITS = {
  message: 130,
  alias: 512,
  description: 15_000,
  entity: 512,
  source: 100,
  user: 100,
  note: 25_000,
  tags: 20,
  tag: 50,
  detailValue: 1000,
} as const;

export const OPSGENIE_API = "https://api.opsgenie.com";

export const opsgenieSettings = settingsObject({
  api_key: z
    .string({ error: "api_key must be the API key (a GenieKey, a UUID) of an Opsgenie API integration" })
    .regex(/^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/, {
      error:
        "api_key must be the API key of an Opsgenie API integration, shaped like a UUID " +
        "(xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx): Settings → Integrations → API → API Key",
    }),
  api_url: baseUrlSetting("api_url", `${OPSGENIE_API} (or https://api.eu.opsgenie.com)`).optional(),
});
export type OpsgenieSettings = z.output<typeof opsgenieSettings>;

const PRIORITY = { critical: "P1", warning: "P3", info: "P5" } as const;

function createBody(alert: ChannelAlert) {
  const details: Record<string, string> = { kind: alert.kind, alert_id: alert.id };
  if (alert.connectionName)
    details.connection = cut(oneLine(alert.connectionName), OPSGENIE_LIMITS.detailValue);
  if (alert.connectionId) details.connection_id = alert.connectionId;
  if (alert.incidentId) details.incident_id = alert.incidentId;
  if (alert.incidentKind) details.incident_kind = alert.incidentKind;
  for (const l of links(alert)) details[`${l.key}_url`] = cut(l.url, OPSGENIE_LIMITS.detailValue);
  const tags = ["vigil", alert.kind, alert.incidentKind]
    .filter((t): t is string => !!t)
    .map((t) => cut(oneLine(t), OPSGENIE_LIMITS.tag))
    .slice(0, OPSGENIE_LIMITS.tags);
  const entity = oneLine(alert.connectionName ?? alert.connectionId ?? "");
  const description = bodyText(alert);
  return {
    message: cut(headline(alert), OPSGENIE_LIMITS.message),
    alias: cut(dedupKey(alert), OPSGENIE_LIMITS.alias),
    ...(description ? { description: cut(description, OPSGENIE_LIMITS.description) } : {}),
    details,
    ...(entity ? { entity: cut(entity, OPSGENIE_LIMITS.entity) } : {}),
    source: "Vigil",
    priority: alert.kind === "test" || alert.event === "info" ? "P5" : PRIORITY[alert.severity],
    tags,
  };
}

export const opsgenie: Provider<OpsgenieSettings> = {
  type: "opsgenie",
  settings: opsgenieSettings,
  secretFields: ["api_key"],
  urlFields: ["api_url"],
  hint: (s) => {
    let host = "api.opsgenie.com";
    try {
      host = new URL(s.api_url ?? OPSGENIE_API).host;
    } catch {
      // a checked setting always parses
    }
    return `api key ${lastChars(s.api_key)} (${host})`;
  },
  request(alert, s) {
    const base = s.api_url ?? OPSGENIE_API;
    const headers = { ...JSON_HEADERS, authorization: `GenieKey ${s.api_key}` };
    if (alert.event === "trigger" || alert.event === "info")
      return { url: apiUrl(base, "/v2/alerts"), headers, body: JSON.stringify(createBody(alert)) };
    const verb = alert.event === "acknowledge" ? "acknowledge" : "close";
    const alias = cut(dedupKey(alert), OPSGENIE_LIMITS.alias);
    const note = cut(
      [headline(alert), bodyText(alert)].filter(Boolean).join("\n\n") || toneOf(alert),
      OPSGENIE_LIMITS.note,
    );
    return {
      url: apiUrl(base, `/v2/alerts/${encodeURIComponent(alias)}/${verb}`, { identifierType: "alias" }),
      headers,
      body: JSON.stringify({ source: "Vigil", user: "Vigil", note }),
    };
  },
  interpret(answer, s) {
    return readAnswer(answer, { credential: "api_key", secrets: secretsOf(s, ["api_key"]) });
  },
};
