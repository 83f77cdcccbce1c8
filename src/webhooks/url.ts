import net from "node:net";
import { invalidInput } from "../core/errors.js";
import { refusal, webhookPolicy } from "../lib/outbound.js";

/** The longest webhook URL accepted, in characters. */
export const MAX_URL_LENGTH = 2048;

/** What decides whether a URL may receive webhooks: the configuration, read by the caller. */
export interface UrlRules {
  /** WEBHOOK_ALLOW_HTTP_LOOPBACK: plain http to a loopback host is allowed (tests, local use). */
  allowHttpLoopback: boolean;
  /** PUBLIC_URL (or its default): the service's own origin. */
  publicUrl: string;
  /** The port the service listens on (PORT). */
  port: number;
  /**
   * PROBE_DENY_PRIVATE: a literal non-public address is refused (loopback stays allowed while
   * `allowHttpLoopback`). Link-local and cloud metadata addresses are refused whatever it says.
   */
  denyPrivate?: boolean;
}

/** A URL's host without the brackets of an IPv6 literal, lower case. */
const bare = (hostname: string) => hostname.replace(/^\[|\]$/g, "").toLowerCase();

/**
 * Whether a URL host is this machine's loopback: 127.0.0.0/8 (the WHATWG parser already turned
 * `127.1` and `2130706433` into `127.0.0.1`), ::1 (also IPv4-mapped `::ffff:127.x`), `localhost`
 * and names under `.localhost` (RFC 6761: they resolve to loopback).
 */
export function isLoopbackHost(hostname: string): boolean {
  const h = bare(hostname).replace(/\.$/, "");
  if (h === "localhost" || h.endsWith(".localhost")) return true;
  if (/^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h)) return true;
  if (h === "::1" || h === "0:0:0:0:0:0:0:1") return true;
  // IPv4-mapped loopback as the URL parser writes it: ::ffff:7f00:1 (127.0.0.1) … ::ffff:7fff:ffff
  return /^::ffff:7f[0-9a-f]{2}:[0-9a-f]{1,4}$/.test(h);
}

/** Hosts that mean "every address of this machine" when connected to. */
const isUnspecified = (hostname: string) => ["0.0.0.0", "::", "0:0:0:0:0:0:0:0"].includes(bare(hostname));

const effectivePort = (u: URL) => Number(u.port || (u.protocol === "https:" ? 443 : 80));

/** The URL's origin, e.g. `https://hooks.example.com`: how the alert history names a webhook. */
export const originOf = (u: URL) => u.origin;

/**
 * A short hint of a webhook URL for lists: the origin and the last 4 characters of the rest,
 * `https://hooks.example.com/…x7Qa`. The whole URL may carry a secret (a chat tool's
 * incoming-webhook token), so it is shown only once, when the webhook is created.
 */
export function urlHint(u: URL): string {
  const rest = u.href.slice(u.origin.length);
  if (rest === "/" || rest === "") return `${u.origin}/`;
  return rest.length <= 8 ? `${u.origin}/…` : `${u.origin}/…${rest.slice(-4)}`;
}

/**
 * The outbound policy's refusal of a URL's host as written: a literal IP, or a loopback name
 * (`localhost`, `*.localhost`, which always resolve to loopback). Other names are judged when
 * a delivery connects (src/lib/outbound.ts), against every DNS answer.
 */
export function hostRefusal(u: URL, rules: UrlRules): string | null {
  const h = bare(u.hostname);
  const ip = net.isIP(h) ? h : isLoopbackHost(h) ? "127.0.0.1" : null;
  if (ip === null) return null;
  return refusal(ip, webhookPolicy(rules.denyPrivate ?? false, rules.allowHttpLoopback), h);
}

/**
 * Checks a webhook URL against the rules (docs/webhooks.md) and answers it parsed, or throws a
 * 400 naming `body.url`: an absolute URL of at most 2048 characters; https, or plain http to a
 * loopback host when allowed; no user name or password in it; not a link-local or cloud metadata
 * address, nor (PROBE_DENY_PRIVATE=true) another non-public one, when written as an IP; not the
 * service itself (the origin of PUBLIC_URL, or a loopback or unspecified host on the port Vigil
 * listens on), so an alert cannot be posted back into Vigil's own API.
 */
export function checkWebhookUrl(raw: string, rules: UrlRules, field = "body.url"): URL {
  const FIELD = field;
  if (raw.length > MAX_URL_LENGTH)
    throw invalidInput(FIELD, `must be at most ${MAX_URL_LENGTH} characters (it has ${raw.length})`, {
      field: FIELD,
      max: MAX_URL_LENGTH,
    });
  if (!URL.canParse(raw))
    throw invalidInput(
      FIELD,
      "must be an absolute URL such as https://hooks.example.com/vigil (a relative path or other text is not a URL)",
    );
  const u = new URL(raw);
  if (u.protocol !== "https:" && u.protocol !== "http:")
    throw invalidInput(FIELD, `must be an https URL; ${u.protocol.replace(/:$/, "")} is not supported`);
  if (u.username !== "" || u.password !== "")
    throw invalidInput(
      FIELD,
      "must not contain a user name or password; put a token in the path or query instead, and verify the Vigil-Signature header",
    );
  if (u.protocol === "http:") {
    if (!isLoopbackHost(u.hostname))
      throw invalidInput(FIELD, "must be an https URL; plain http is accepted only to a loopback host");
    if (!rules.allowHttpLoopback)
      throw invalidInput(
        FIELD,
        "must be an https URL; plain http to a loopback host needs WEBHOOK_ALLOW_HTTP_LOOPBACK=true on the server",
      );
  }
  const refused = hostRefusal(u, rules);
  if (refused) throw invalidInput(FIELD, refused);
  if (pointsAtService(u, rules))
    throw invalidInput(
      FIELD,
      "must not point at this Vigil service itself; give the address of your receiver",
    );
  return u;
}

function pointsAtService(u: URL, rules: UrlRules): boolean {
  if (URL.canParse(rules.publicUrl) && new URL(rules.publicUrl).origin === u.origin) return true;
  const local = isLoopbackHost(u.hostname) || isUnspecified(u.hostname);
  return local && effectivePort(u) === rules.port;
}

/** The rules of an app's configuration. */
export const rulesOf = (config: {
  webhooks: { allowHttpLoopback: boolean };
  outbound: { denyPrivate: boolean };
  publicUrl: string;
  port: number;
}): UrlRules => ({
  allowHttpLoopback: config.webhooks.allowHttpLoopback,
  publicUrl: config.publicUrl,
  port: config.port,
  denyPrivate: config.outbound.denyPrivate,
});
