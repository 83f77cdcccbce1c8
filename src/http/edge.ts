import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { STATUS_CODES } from "node:http";
import type { Socket } from "node:net";
import secureJson from "secure-json-parse";
import { ApiError, badRequest, renderError } from "./errors.js";

/**
 * The input rules every request meets before any route sees it, in one place (docs/api.md:
 * Input rules), for REST, the MCP endpoint, OAuth and the sign-in pages alike:
 *
 * - JSON bodies nest at most `MAX_JSON_DEPTH` levels, checked by a scan of the raw text before
 *   it is parsed (a deep document never reaches a recursive parser or validator);
 * - `__proto__` and `constructor.prototype` keys are refused, as Fastify's own parser does;
 * - no text anywhere in the request (path parameters, query, body, object keys) holds what the
 *   stores cannot keep: U+0000, or half of a UTF-16 surrogate pair (PostgreSQL refuses both,
 *   and JSON serialisers turn the latter into U+FFFD). The answer is a 400 naming the field.
 */
export const MAX_JSON_DEPTH = 32;

/**
 * The longest URL (path and query) a route reads, in bytes: far above any real filter, and below
 * Node's 16 KiB limit on the request line and headers together, which answers 431 (see
 * `clientErrors`). A longer one is a 414 in the route's error style.
 */
export const MAX_URL_LENGTH = 8192;

/** Depth of the deepest array or object of a JSON text, by scanning it (strings skipped). */
export function jsonDepth(text: string, limit = Number.POSITIVE_INFINITY): number {
  let depth = 0;
  let max = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c /* \ */) i++;
      else if (c === 0x22 /* " */) inString = false;
      continue;
    }
    if (c === 0x22) inString = true;
    else if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      if (++depth > max) {
        max = depth;
        if (max > limit) return max;
      }
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) depth--;
  }
  return max;
}

/**
 * True when the text holds at most `n` of `{` and `[` in all (strings included): then nothing in
 * it nests deeper than `n`, and the character scan of `jsonDepth` is not needed. Counted with
 * `indexOf`, which skips the text between them natively: a heartbeat has about a dozen, so this
 * costs a fraction of the scan (about 2 us of a heartbeat's CPU).
 */
export function fewOpeners(text: string, n: number): boolean {
  let count = 0;
  for (let i = text.indexOf("{"); i !== -1; i = text.indexOf("{", i + 1)) if (++count > n) return false;
  for (let i = text.indexOf("["); i !== -1; i = text.indexOf("[", i + 1)) if (++count > n) return false;
  return true;
}

/** A \u escape of U+0000 or of a surrogate half (which may still be half of a valid pair). */
const MAYBE_UNSTORABLE = /\\u(0000|d[89a-f])/i;
/** Parsed bodies whose text had no such escape: all their text can be stored. */
const storableBodies = new WeakSet<object>();

/** Parses a JSON body after checking its depth; errors are the 400s the error handler renders. */
export function parseJsonBody(text: string): unknown {
  if (text.length === 0) {
    const err = new Error("empty body") as Error & { code: string; statusCode: number };
    err.code = "FST_ERR_CTP_EMPTY_JSON_BODY";
    err.statusCode = 400;
    throw err;
  }
  if (!fewOpeners(text, MAX_JSON_DEPTH) && jsonDepth(text, MAX_JSON_DEPTH) > MAX_JSON_DEPTH)
    throw badRequest(`body: nested deeper than ${MAX_JSON_DEPTH} levels; flatten the document.`, {
      max_depth: MAX_JSON_DEPTH,
    });
  try {
    const value = secureJson.parse(text, undefined, { protoAction: "error", constructorAction: "error" });
    // JSON text can hold U+0000 or a surrogate half only as a \u escape: without one, no text
    // in the value needs the walk below (most bodies; a heartbeat's is checked in ~0.3 us)
    if (value !== null && typeof value === "object" && !MAYBE_UNSTORABLE.test(text))
      storableBodies.add(value);
    return value;
  } catch (err) {
    if (/prototype/i.test((err as Error).message))
      throw badRequest("body: must not set __proto__ or constructor.prototype; rename the field.");
    throw badRequest(`body: malformed JSON (${(err as Error).message}); send a valid JSON document.`);
  }
}

/** Half of a surrogate pair, alone (matched on UTF-16 code units: no `u` flag). */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const storable = (s: string) => !s.includes("\u0000") && !LONE_SURROGATE.test(s);

const UNSTORABLE = "contains U+0000 or half of a surrogate pair, which cannot be stored; remove it";

/** The path of the first text in `value` (keys included) that cannot be stored, or null. */
export function unstorableText(value: unknown, path: string, depth = 0): string | null {
  if (typeof value === "string") return storable(value) ? null : path;
  if (value === null || typeof value !== "object" || depth > MAX_JSON_DEPTH + 2) return null;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = unstorableText(value[i], `${path}[${i}]`, depth + 1);
      if (found) return found;
    }
    return null;
  }
  for (const [k, v] of Object.entries(value)) {
    if (!storable(k)) return `${path} (a field name)`;
    const found = unstorableText(v, `${path}.${k}`, depth + 1);
    if (found) return found;
  }
  return null;
}

/**
 * Installs the JSON parser and the text check on every route of the app. A request no route
 * takes (an unknown path, or a known path with another method) is answered 404 or 405 whatever
 * it carries: its body is not read (not parsed, not measured against a limit) and its text is
 * not checked, so a wrong method never reads as a malformed body or a 413.
 */
export function registerInputRules(app: FastifyInstance): void {
  app.addHook("onRequest", (req, _reply, done) => {
    const length = req.url.length;
    if (length <= MAX_URL_LENGTH) return done();
    done(
      new ApiError(
        414,
        "URI_TOO_LONG",
        `The URL is ${length} bytes long; at most ${MAX_URL_LENGTH} are read. Send fewer or shorter query parameters.`,
        { max_length: MAX_URL_LENGTH },
      ),
    );
  });
  app.addHook("preParsing", (req, _reply, payload, done) => {
    if (req.is404) {
      // Fastify reads no body when a request says it has none
      delete req.headers["content-type"];
      delete req.headers["transfer-encoding"];
      req.headers["content-length"] = "0";
    }
    done(null, payload);
  });
  app.removeContentTypeParser("application/json");
  app.addContentTypeParser("application/json", { parseAs: "string" }, (_req, body, done) => {
    try {
      done(null, parseJsonBody(body as string));
    } catch (err) {
      done(err as Error, undefined);
    }
  });
  app.addHook("preValidation", (req, _reply, done) => {
    if (req.is404) return done();
    const field =
      unstorableText(req.params, "params") ??
      unstorableText(req.query, "query") ??
      // a Buffer is an OTLP body (http/otlp.ts): bytes, decoded and checked by its own route
      (storableBodies.has(req.body as object) || Buffer.isBuffer(req.body)
        ? null
        : unstorableText(req.body, "body"));
    if (field) return done(new ApiError(400, "VALIDATION_ERROR", `${field}: ${UNSTORABLE}.`, { field }));
    done();
  });
}

/**
 * The answers to a URL the router cannot read, in the API's error body (Fastify's own would be a
 * body of another shape, echoing the URL): a path that is not valid percent-encoded UTF-8 is a
 * 400; a path segment longer than the router takes (100 characters, far above any id) names no
 * route, a 404. Given to Fastify as its `frameworkErrors` option (app.ts).
 */
export function frameworkErrors(err: FastifyError, req: FastifyRequest, reply: FastifyReply): void {
  const path = `${req.method} ${(req.raw.url ?? "/").split("?")[0]?.slice(0, 200)}`;
  const answer =
    err.code === "FST_ERR_BAD_URL"
      ? badRequest("The URL's path is not valid percent-encoded UTF-8; encode it as RFC 3986 says.")
      : err.code === "FST_ERR_MAX_PARAM_LENGTH"
        ? new ApiError(404, "NOT_FOUND", `No route ${path}: a path segment is longer than 100 characters.`)
        : new ApiError(500, "INTERNAL_ERROR", "Internal server error.");
  if (answer.statusCode >= 500) req.log.error({ err }, "request failed");
  void reply.code(answer.statusCode).send(renderError("envelope", answer));
}

/**
 * What Node's HTTP parser refuses before Fastify sees a request, answered in the API's envelope
 * (Fastify's own answer has another body): a request line and headers over Node's limit (16 KiB
 * unless `--max-http-header-size` says otherwise) are a 431, a request that took too long a 408,
 * anything unparsable a 400. Given to Fastify as its `clientErrorHandler` option (app.ts).
 */
export function clientErrors(err: NodeJS.ErrnoException, socket: Socket): void {
  if (err.code === "ECONNRESET" || socket.destroyed) return;
  const [status, code, message] =
    err.code === "HPE_HEADER_OVERFLOW"
      ? [
          431,
          "HEADERS_TOO_LARGE",
          "The request line and headers are larger than the server reads (16 KiB); shorten the URL or the headers.",
        ]
      : err.code === "ERR_HTTP_REQUEST_TIMEOUT"
        ? [408, "REQUEST_TIMEOUT", "The request was not received in time; send it again."]
        : [400, "BAD_REQUEST", "The request is not valid HTTP/1.1."];
  const body = JSON.stringify(renderError("envelope", new ApiError(status, code, message)));
  if (socket.writable)
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nConnection: close\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
  socket.destroy();
}
