import { z } from "zod";
import type { ChannelAlert, ProviderAnswer, ProviderOutcome } from "./types.js";

/**
 * What the provider modules share: cutting text to a provider's limits (with an ellipsis, never
 * splitting a character), how an alert reads (its tone, headline, facts and links), the settings
 * URL rules, and how a provider's answer reads (statuses, Retry-After, the provider's own message
 * without any secret).
 *
 * Lengths are counted in UTF-16 code units (JavaScript's `length`). Slack, Discord and Telegram
 * count characters as code points or UTF-16 code units; a text within the limit in code units is
 * within it either way.
 */

const ELLIPSIS = "…";

const isHighSurrogate = (code: number) => code >= 0xd800 && code <= 0xdbff;

/** `text` cut to at most `max` UTF-16 code units, ending with `…` when cut; never splits a surrogate pair. */
export function cut(text: string, max: number): string {
  if (text.length <= max) return text;
  if (max <= 0) return "";
  let end = max - ELLIPSIS.length;
  if (end > 0 && isHighSurrogate(text.charCodeAt(end - 1))) end--;
  return text.slice(0, end) + ELLIPSIS;
}

/**
 * `text` escaped character by character with `escape`, cut so that the escaped text (what the
 * provider counts) is at most `max` code units, ending with `…` when cut. An escape sequence is
 * never split (`&am…` cannot happen).
 */
export function cutEscaped(text: string, max: number, escape: (s: string) => string): string {
  const whole = escape(text);
  if (whole.length <= max) return whole;
  if (max <= 0) return "";
  let out = "";
  for (const ch of text) {
    const e = escape(ch);
    if (out.length + e.length > max - ELLIPSIS.length) break;
    out += e;
  }
  return out + ELLIPSIS;
}

/** UTF-8 bytes of `text`. */
export const utf8Bytes = (text: string): number => Buffer.byteLength(text, "utf8");

/** `text` cut to at most `maxBytes` UTF-8 bytes, ending with `…` (3 bytes) when cut; never splits a character. */
export function cutBytes(text: string, maxBytes: number): string {
  if (utf8Bytes(text) <= maxBytes) return text;
  const budget = maxBytes - utf8Bytes(ELLIPSIS);
  if (budget < 0) return "";
  let out = "";
  let bytes = 0;
  for (const ch of text) {
    const b = utf8Bytes(ch);
    if (bytes + b > budget) break;
    out += ch;
    bytes += b;
  }
  return out + ELLIPSIS;
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;
// C0 controls but tab and line feed, DEL, and the C1 controls
// eslint-disable-next-line no-control-regex
const CONTROLS = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g;

/**
 * Multi-line text as every provider can carry it: line breaks as `\n`, no other control
 * characters, no lone surrogates (they are not UTF-8: ntfy would turn the message into an
 * attachment, Telegram refuses it), no trailing blanks.
 */
export function cleanText(text: string): string {
  return text
    .replace(/\r\n?/g, "\n")
    .replace(/[\u2028\u2029]/g, "\n")
    .replace(CONTROLS, "")
    .replace(LONE_SURROGATE, "\uFFFD")
    .trim();
}

/** One line: every run of white space and control characters becomes one space. */
export function oneLine(text: string): string {
  return cleanText(text).replace(/\s+/g, " ").trim();
}

// --- how an alert reads

/** How an alert reads: a test, a recovery or resolve (green), an acknowledgement, or its severity. */
export type Tone = "test" | "resolved" | "acknowledged" | "critical" | "warning" | "info";

export function toneOf(alert: ChannelAlert): Tone {
  if (alert.kind === "test") return "test";
  if (alert.event === "resolve" || alert.kind === "recovery") return "resolved";
  if (alert.event === "acknowledge" || alert.kind === "acknowledged") return "acknowledged";
  return alert.severity;
}

export const TONE_LABEL: Record<Tone, string> = {
  test: "Test",
  resolved: "Resolved",
  acknowledged: "Acknowledged",
  critical: "Critical",
  warning: "Warning",
  info: "Info",
};

/** An emoji per tone, for the chat providers (Slack, Discord, Telegram). */
export const TONE_EMOJI: Record<Tone, string> = {
  test: "🧪",
  resolved: "✅",
  acknowledged: "👀",
  critical: "🔴",
  warning: "🟠",
  info: "🔵",
};

/** `Resolved: alice n8n is back up`, `Test: …`: the tone's label, then the subject on one line. */
export function headline(alert: ChannelAlert): string {
  return `${TONE_LABEL[toneOf(alert)]}: ${oneLine(alert.subject) || "(no subject)"}`;
}

/** The alert's body, cleaned; a test says it is one. */
export function bodyText(alert: ChannelAlert): string {
  const body = cleanText(alert.body);
  if (alert.kind !== "test") return body;
  const note = "This is a test notification from Vigil: nothing needs doing.";
  return body ? `${body}\n\n${note}` : note;
}

/** The alert's facts, the empty ones left out: connection, kind, incident. */
export function facts(alert: ChannelAlert): { name: string; value: string }[] {
  const out: { name: string; value: string }[] = [];
  const connection = alert.connectionName ?? alert.connectionId;
  if (connection) out.push({ name: "Connection", value: oneLine(connection) });
  out.push({
    name: "Kind",
    value: oneLine(alert.incidentKind ? `${alert.kind} (${alert.incidentKind})` : alert.kind),
  });
  if (alert.incidentId) out.push({ name: "Incident", value: oneLine(alert.incidentId) });
  return out;
}

/** The dashboard links that exist: the incident's page, the connection's page, the home page. */
export function links(alert: ChannelAlert): { text: string; url: string; key: string }[] {
  const out: { text: string; url: string; key: string }[] = [];
  if (alert.links.incident) out.push({ text: "Open incident", url: alert.links.incident, key: "incident" });
  if (alert.links.connection)
    out.push({ text: "Open connection", url: alert.links.connection, key: "connection" });
  out.push({ text: "Open dashboard", url: alert.links.dashboard, key: "dashboard" });
  return out;
}

/** The link a click on the notification opens: the incident, else the connection, else the dashboard. */
export const mainLink = (alert: ChannelAlert): string =>
  alert.links.incident ?? alert.links.connection ?? alert.links.dashboard;

/**
 * The paging providers' key for one Vigil incident: `vigil-incident-<incidentId>` (so trigger,
 * acknowledge and resolve meet on the same PagerDuty alert / Opsgenie alias), else
 * `vigil-<alert id>`. An `info` event always uses the alert's id: it is a message of its own.
 */
export function dedupKey(alert: ChannelAlert): string {
  return alert.incidentId && alert.event !== "info"
    ? `vigil-incident-${alert.incidentId}`
    : `vigil-${alert.id}`;
}

// --- escaping

const HTML_ESCAPES: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" };
/** `& < > "` as HTML entities (Telegram's HTML parse mode knows exactly these named entities). */
export const escapeHtml = (s: string): string => s.replace(/[&<>"]/g, (c) => HTML_ESCAPES[c] ?? c);

// --- settings

/**
 * A provider's settings object: strict (an unknown field is refused by name), and a body that is
 * not an object says which fields it takes.
 */
export function settingsObject<T extends z.ZodRawShape>(shape: T) {
  const known = Object.keys(shape).join(", ");
  return z.strictObject(shape, {
    error: (iss) => {
      if (iss.code === "unrecognized_keys")
        return `unknown field${iss.keys.length > 1 ? "s" : ""} ${iss.keys.join(", ")}: the settings take ${known}`;
      if (iss.code === "invalid_type" && !iss.path?.length)
        return `settings must be a JSON object with ${known}`;
      return undefined;
    },
  });
}

/** The longest URL a settings field takes. */
export const MAX_SETTINGS_URL = 2048;

function parseHttpUrl(value: string): URL | null {
  // the URL parser would silently drop white space and controls: refuse them instead
  // eslint-disable-next-line no-control-regex
  if (/[\s\u0000-\u001f]/.test(value)) return null;
  try {
    const u = new URL(value);
    if (u.protocol !== "https:" && u.protocol !== "http:") return null;
    if (!u.hostname || u.username || u.password) return null;
    return u;
  } catch {
    return null;
  }
}

/**
 * A settings URL: absolute http(s), no user name or password, at most 2048 characters. Plain
 * http passes here; the outbound rules (checked when the channel is saved and at every send)
 * decide where Vigil may connect.
 */
export function urlSetting(field: string, what: string) {
  const error = `${field} must be ${what}: an absolute https:// URL without a user name or password`;
  return z
    .string({ error })
    .max(MAX_SETTINGS_URL, { error: `${field} must be at most ${MAX_SETTINGS_URL} characters` })
    .refine((v) => parseHttpUrl(v) !== null, { error });
}

/**
 * A provider's API base URL: absolute http(s), no credentials, query or fragment. A path prefix is
 * allowed (a relay in front of the provider: `https://relay.example.com/pagerduty`); the API's
 * own path is appended to it.
 */
export function baseUrlSetting(field: string, example: string) {
  const error =
    `${field} must be the API's base URL, e.g. ${example}: absolute http(s), ` +
    "without a user name, password, query or fragment";
  return z
    .string({ error })
    .max(MAX_SETTINGS_URL, { error: `${field} must be at most ${MAX_SETTINGS_URL} characters` })
    .refine(
      (v) => {
        const u = parseHttpUrl(v);
        return u !== null && !u.search && !u.hash && !v.includes("?") && !v.includes("#");
      },
      { error },
    );
}

/** `base` (a checked base URL, its path a prefix) joined with an API path and an optional query. */
export function apiUrl(base: string, path: string, query?: Record<string, string>): URL {
  const u = new URL(base);
  u.pathname = u.pathname.replace(/\/+$/, "") + path;
  u.search = query ? new URLSearchParams(query).toString() : "";
  return u;
}

/** `host/…last4` of a webhook URL: names the receiver, shows the last 4 characters of its secret part. */
export function urlHint(url: string, keep = 4): string {
  try {
    const u = new URL(url);
    const tail = (u.pathname.replace(/\/+$/, "") + u.search).slice(-keep);
    return `${u.host}/…${tail}`;
  } catch {
    return "…";
  }
}

/** The last `keep` characters of a secret, after an ellipsis. */
export const lastChars = (secret: string, keep = 4): string => `…${secret.slice(-keep)}`;

// --- answers

/** A header of an answer by name, whatever its case; the first value of a repeated one. */
export function headerValue(headers: ProviderAnswer["headers"], name: string): string | undefined {
  const want = name.toLowerCase();
  for (const [k, v] of Object.entries(headers)) {
    if (k.toLowerCase() !== want) continue;
    return Array.isArray(v) ? v[0] : v;
  }
  return undefined;
}

/** Retry waits are capped at a day: a provider asking for more is misread, not obeyed. */
export const MAX_RETRY_AFTER_MS = 24 * 3600 * 1000;

/** Seconds (a provider's `retry_after`) as milliseconds, or undefined when not a usable number. */
export function secondsToMs(seconds: unknown): number | undefined {
  if (typeof seconds !== "number" || !Number.isFinite(seconds) || seconds < 0) return undefined;
  return Math.min(Math.ceil(seconds * 1000), MAX_RETRY_AFTER_MS);
}

/**
 * The `Retry-After` header (RFC 9110 §10.2.3) in milliseconds: delay-seconds, or an HTTP date,
 * measured from the answer's own `Date` header (the provider's clock) when it has one, else from
 * now. Undefined when absent or unreadable (the delivery job's back-off decides).
 */
export function retryAfterMs(headers: ProviderAnswer["headers"]): number | undefined {
  const raw = headerValue(headers, "retry-after")?.trim();
  if (!raw) return undefined;
  if (/^\d+(\.\d+)?$/.test(raw)) return secondsToMs(Number(raw));
  const at = Date.parse(raw);
  if (Number.isNaN(at)) return undefined;
  const date = Date.parse(headerValue(headers, "date") ?? "");
  return secondsToMs(Math.max(0, at - (Number.isNaN(date) ? Date.now() : date)) / 1000);
}

/** An answer's body as JSON, or undefined. */
export function jsonOf(body: string): unknown {
  try {
    return JSON.parse(body) as unknown;
  } catch {
    return undefined;
  }
}

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/** Every string leaf of a provider's `errors` (PagerDuty: strings; Opsgenie: a map; Discord: nested `_errors`). */
function errorStrings(v: unknown, out: string[], depth = 0): void {
  if (out.length >= 5 || depth > 6) return;
  if (typeof v === "string") out.push(v);
  else if (Array.isArray(v)) for (const x of v) errorStrings(x, out, depth + 1);
  else if (isRecord(v))
    for (const [k, x] of Object.entries(v)) if (k !== "code") errorStrings(x, out, depth + 1);
}

/**
 * The provider's own words in an error answer, on one line: Telegram's `description`, the
 * `message` of PagerDuty, Opsgenie, Discord (with their `errors`), ntfy's `error`, an Azure
 * `error.message` (Teams), or a plain-text body (Slack's `invalid_payload`). HTML pages are
 * reduced to their text.
 */
export function providerMessage(body: string): string {
  const text = body.trim();
  if (!text) return "";
  const json = jsonOf(text);
  if (isRecord(json)) {
    const parts: string[] = [];
    for (const key of ["description", "message", "error", "status"]) {
      const v = json[key];
      if (typeof v === "string" && v.trim()) {
        parts.push(v);
        break;
      }
      if (isRecord(v) && typeof v.message === "string") {
        parts.push(v.message);
        break;
      }
    }
    const errors: string[] = [];
    errorStrings(json.errors, errors);
    parts.push(...errors.filter((e) => !parts.includes(e)));
    if (parts.length) return oneLine(parts.join(": "));
  }
  if (typeof json === "string") return oneLine(json);
  return oneLine(text.replace(/<[^>]*>/g, " "));
}

/**
 * The secrets to keep out of error text: each secret setting's value, and for a URL its long path
 * segments, its last segment (an ntfy topic, a Slack or Discord token) and its query values (a
 * Teams `sig`).
 */
export function secretsOf(settings: Record<string, unknown>, fields: readonly string[]): string[] {
  const out = new Set<string>();
  for (const f of fields) {
    const v = settings[f];
    if (typeof v !== "string" || v.length < 4) continue;
    out.add(v);
    const u = parseHttpUrl(v);
    if (!u) continue;
    const segments = u.pathname.split("/").filter(Boolean);
    segments.forEach((s, i) => {
      if (s.length >= 12 || (i === segments.length - 1 && s.length >= 4)) out.add(s);
    });
    for (const value of u.searchParams.values()) if (value.length >= 8) out.add(value);
    out.add(u.pathname + u.search);
  }
  for (const s of [...out]) out.add(encodeURIComponent(s));
  return [...out].filter((s) => s.length >= 4 && s !== "/").sort((a, b) => b.length - a.length);
}

/** `text` with every secret replaced by `…`. */
export function scrub(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const s of secrets) out = out.split(s).join("…");
  return out;
}

/** The longest provider message kept in an error. */
export const MAX_PROVIDER_MESSAGE = 200;

export interface AnswerRules {
  /** The settings field a 401 or 403 refuses (the credential). */
  credential: string;
  /** Secret values to keep out of the error (secretsOf). */
  secrets: readonly string[];
  /** A provider-specific refused field for an error answer, read from its status and message. */
  refused?: (answer: ProviderAnswer, message: string) => string | undefined;
  /** A provider-specific wait, read from the body (Telegram's and Discord's `retry_after`). */
  retryAfter?: (answer: ProviderAnswer) => number | undefined;
  /** The provider's message when the body's words are not enough (e.g. a known status's meaning). */
  message?: (answer: ProviderAnswer) => string | undefined;
}

/**
 * The common reading of an answer: any 2xx is accepted; 408, 429 and 5xx are retried (waiting as
 * `Retry-After` says, seconds or an HTTP date); a 3xx gives up (redirects are not followed); any
 * other status gives up with `HTTP <status>: <the provider's message, at most 200 characters>`,
 * a 401 or 403 naming the credential as the refused field. No secret is ever in the error.
 */
export function readAnswer(answer: ProviderAnswer, rules: AnswerRules): ProviderOutcome {
  const { status } = answer;
  if (status >= 200 && status < 300) return { error: null };
  if (status >= 300 && status < 400)
    return { error: `HTTP ${status} (redirects are not followed)`, giveUp: true };
  const said = rules.message?.(answer) ?? providerMessage(answer.body);
  const message = cut(oneLine(scrub(said, rules.secrets)), MAX_PROVIDER_MESSAGE);
  const error = message ? `HTTP ${status}: ${message}` : `HTTP ${status}`;
  if (status === 408 || status === 429 || status >= 500) {
    const wait = rules.retryAfter?.(answer) ?? retryAfterMs(answer.headers);
    return wait === undefined ? { error } : { error, retryAfterMs: wait };
  }
  const refusedField =
    rules.refused?.(answer, said) ?? (status === 401 || status === 403 ? rules.credential : undefined);
  return refusedField ? { error, giveUp: true, refusedField } : { error, giveUp: true };
}

/** The JSON request headers every JSON provider sends. */
export const JSON_HEADERS: Readonly<Record<string, string>> = {
  "content-type": "application/json; charset=utf-8",
  accept: "application/json",
  "user-agent": "Vigil",
};
