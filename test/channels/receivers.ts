import { randomUUID } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import type { Test } from "tap";

/**
 * Local stand-ins for the notification providers: each one a real HTTP server on 127.0.0.1 that
 * checks what arrives against the provider's documented contract (method, path, headers, body
 * shape, every length limit) and answers as the provider does. A request that breaks the contract
 * is answered 400 with the problems (as the provider would refuse it) and the problems are kept
 * for the test to show. `control.replies` forces the next answers (error answers over the wire).
 *
 * The limits are restated here from the providers' documentation, independently of src/: the
 * test must not trust the code it checks.
 */

export interface Got {
  method: string;
  /** The path and query, as sent. */
  path: string;
  headers: http.IncomingHttpHeaders;
  raw: Buffer;
  body: string;
}

export interface Reply {
  status: number;
  headers?: Record<string, string>;
  body?: string;
}

export interface Received extends Got {
  problems: string[];
  /** What the check read of the request (the parsed JSON, the decoded title, …). */
  seen: Record<string, unknown>;
}

/** A provider's contract: the problems of one request and the answer the provider gives it. */
export type Contract = (got: Got, p: Problems) => { seen?: Record<string, unknown>; reply: Reply };

export class Problems {
  readonly list: string[] = [];
  expect(ok: unknown, problem: string): boolean {
    if (!ok) this.list.push(problem);
    return !!ok;
  }
  /** A string of 1..max UTF-16 code units (what every provider here counts, or more). */
  text(v: unknown, max: number, what: string, min = 1): v is string {
    if (!this.expect(typeof v === "string", `${what} must be a string`)) return false;
    const s = v as string;
    this.expect(s.length >= min, `${what} must have at least ${min} characters`);
    this.expect(s.length <= max, `${what} is ${s.length} characters, more than ${max}`);
    this.expect(
      !/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(s),
      `${what} has a lone surrogate`,
    );
    return true;
  }
  url(v: unknown, what: string, max = 3000): v is string {
    if (!this.text(v, max, what)) return false;
    try {
      const u = new URL(v as string);
      return this.expect(u.protocol === "https:" || u.protocol === "http:", `${what} must be an http(s) URL`);
    } catch {
      return this.expect(false, `${what} must be an absolute URL`);
    }
  }
  only(obj: Record<string, unknown>, keys: readonly string[], what: string) {
    for (const k of Object.keys(obj)) this.expect(keys.includes(k), `${what} has an unknown field ${k}`);
  }
}

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

function jsonBody(got: Got, p: Problems): Record<string, unknown> {
  p.expect(got.method === "POST", `method ${got.method}, expected POST`);
  p.expect(
    /^application\/json\b/.test(got.headers["content-type"] ?? ""),
    "content-type must be application/json",
  );
  p.expect(Buffer.from(got.raw.toString("utf8"), "utf8").equals(got.raw), "the body must be valid UTF-8");
  try {
    const j = JSON.parse(got.body) as unknown;
    p.expect(isRecord(j), "the body must be a JSON object");
    return isRecord(j) ? j : {};
  } catch {
    p.expect(false, "the body must be JSON");
    return {};
  }
}

const json = (status: number, body: unknown, headers: Record<string, string> = {}): Reply => ({
  status,
  headers: { "content-type": "application/json", ...headers },
  body: JSON.stringify(body),
});

/** Starts a receiver that checks every request with `contract`. */
export async function receiver(t: Test, contract: Contract) {
  const received: Received[] = [];
  const control = { replies: [] as Reply[] };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const raw = Buffer.concat(chunks);
      const got: Got = {
        method: req.method ?? "",
        path: req.url ?? "",
        headers: req.headers,
        raw,
        body: raw.toString("utf8"),
      };
      const p = new Problems();
      let reply: Reply;
      let seen: Record<string, unknown> = {};
      try {
        const r = contract(got, p);
        reply = r.reply;
        seen = r.seen ?? {};
      } catch (err) {
        p.expect(false, `the check threw: ${String(err)}`);
        reply = { status: 500 };
      }
      received.push({ ...got, problems: p.list, seen });
      const forced = control.replies.shift();
      if (p.list.length && !forced) reply = json(400, { problems: p.list });
      else if (forced) reply = forced;
      res.writeHead(reply.status, reply.headers ?? {});
      res.end(reply.body ?? "");
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  t.teardown(
    () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  );
  return { url, received, control, last: () => received.at(-1) };
}

// --- Slack: incoming webhook, Block Kit (docs.slack.dev/reference/block-kit)

const SLACK_BLOCK_TYPES = ["header", "section", "actions", "context", "divider"];

/** mrkdwn text: `&`, `<`, `>` only as `&amp;`, `&lt;`, `&gt;` (no `<!channel>`, `<@U…>` from alert text). */
function slackEscaped(p: Problems, s: string, what: string) {
  p.expect(!/[<>]/.test(s), `${what} has an unescaped < or >`);
  p.expect(!/&(?!(amp|lt|gt);)/.test(s), `${what} has an unescaped &`);
}

export const slackContract =
  (path: string): Contract =>
  (got, p) => {
    const j = jsonBody(got, p);
    p.expect(got.path === path, `path ${got.path}, expected ${path}`);
    p.text(j.text, 40_000, "text");
    if (typeof j.text === "string") slackEscaped(p, j.text, "text");
    const blocks = Array.isArray(j.blocks) ? (j.blocks as unknown[]) : [];
    p.expect(Array.isArray(j.blocks) && blocks.length >= 1, "blocks must be a non-empty array");
    p.expect(blocks.length <= 50, `${blocks.length} blocks, more than 50`);
    const actionIds = new Set<string>();
    blocks.forEach((b, i) => {
      const what = `blocks[${i}]`;
      if (!p.expect(isRecord(b), `${what} must be an object`) || !isRecord(b)) return;
      p.expect(
        SLACK_BLOCK_TYPES.includes(b.type as string),
        `${what}.type ${String(b.type)} is not a block type`,
      );
      if (b.block_id !== undefined) p.text(b.block_id, 255, `${what}.block_id`);
      if (b.type === "header") {
        const text = b.text as Record<string, unknown>;
        p.expect(isRecord(text) && text.type === "plain_text", `${what}.text must be plain_text`);
        p.text(text?.text, 150, `${what}.text.text`);
      }
      if (b.type === "section") {
        p.expect(b.text !== undefined || b.fields !== undefined, `${what} needs text or fields`);
        if (b.text !== undefined) {
          const text = b.text as Record<string, unknown>;
          p.expect(["mrkdwn", "plain_text"].includes(text?.type as string), `${what}.text.type`);
          if (p.text(text?.text, 3000, `${what}.text.text`) && text.type === "mrkdwn")
            slackEscaped(p, text.text as string, `${what}.text.text`);
        }
        if (b.fields !== undefined) {
          const fields = b.fields as unknown[];
          p.expect(
            Array.isArray(fields) && fields.length >= 1 && fields.length <= 10,
            `${what}.fields: 1 to 10`,
          );
          (Array.isArray(fields) ? fields : []).forEach((f, k) => {
            const field = f as Record<string, unknown>;
            p.expect(["mrkdwn", "plain_text"].includes(field?.type as string), `${what}.fields[${k}].type`);
            if (p.text(field?.text, 2000, `${what}.fields[${k}].text`) && field.type === "mrkdwn")
              slackEscaped(p, field.text as string, `${what}.fields[${k}].text`);
          });
        }
      }
      if (b.type === "actions") {
        const elements = b.elements as unknown[];
        p.expect(
          Array.isArray(elements) && elements.length >= 1 && elements.length <= 25,
          `${what}.elements: 1 to 25`,
        );
        (Array.isArray(elements) ? elements : []).forEach((e, k) => {
          const el = e as Record<string, unknown>;
          const ew = `${what}.elements[${k}]`;
          p.expect(el?.type === "button", `${ew}.type must be button`);
          const text = el?.text as Record<string, unknown>;
          p.expect(isRecord(text) && text.type === "plain_text", `${ew}.text must be plain_text`);
          p.text(text?.text, 75, `${ew}.text.text`);
          p.url(el?.url, `${ew}.url`, 3000);
          if (p.text(el?.action_id, 255, `${ew}.action_id`)) {
            p.expect(!actionIds.has(el.action_id as string), `${ew}.action_id is not unique`);
            actionIds.add(el.action_id as string);
          }
        });
      }
    });
    return { seen: j, reply: { status: 200, headers: { "content-type": "text/plain" }, body: "ok" } };
  };

// --- Teams: Workflows webhook, Adaptive Card 1.4

const CARD_ELEMENTS = ["TextBlock", "FactSet", "ColumnSet", "Container", "Image"];

export const teamsContract =
  (path: string): Contract =>
  (got, p) => {
    const j = jsonBody(got, p);
    p.expect(got.path === path, `path ${got.path}, expected ${path}`);
    p.expect(
      got.raw.length < 28 * 1000,
      `the message is ${got.raw.length} bytes, Teams refuses more than 28 KB`,
    );
    p.expect(j.type === "message", "type must be message");
    const attachments = j.attachments as unknown[];
    p.expect(Array.isArray(attachments) && attachments.length === 1, "one attachment");
    const a = (Array.isArray(attachments) ? attachments[0] : {}) as Record<string, unknown>;
    p.expect(a.contentType === "application/vnd.microsoft.card.adaptive", "contentType of an Adaptive Card");
    p.expect(a.contentUrl === null, "contentUrl null");
    const card = (a.content ?? {}) as Record<string, unknown>;
    p.expect(card.$schema === "http://adaptivecards.io/schemas/adaptive-card.json", "$schema");
    p.expect(card.type === "AdaptiveCard", "type AdaptiveCard");
    p.expect(card.version === "1.4", `version ${String(card.version)}, expected 1.4`);
    const body = card.body as unknown[];
    p.expect(Array.isArray(body) && body.length >= 1, "body: a non-empty array");
    (Array.isArray(body) ? body : []).forEach((e, i) => {
      const el = e as Record<string, unknown>;
      p.expect(CARD_ELEMENTS.includes(el?.type as string), `body[${i}].type ${String(el?.type)}`);
      if (el?.type === "TextBlock") p.text(el.text, 100_000, `body[${i}].text`);
      if (el?.type === "FactSet") {
        const facts = el.facts as unknown[];
        p.expect(Array.isArray(facts), `body[${i}].facts`);
        (Array.isArray(facts) ? facts : []).forEach((f, k) => {
          const fact = f as Record<string, unknown>;
          p.text(fact?.title, 1000, `body[${i}].facts[${k}].title`);
          p.text(fact?.value, 10_000, `body[${i}].facts[${k}].value`);
        });
      }
    });
    const first = (Array.isArray(body) ? body[0] : {}) as Record<string, unknown>;
    p.expect(
      first?.type === "TextBlock" && /^bolder$/i.test(String(first.weight)) && first.wrap === true,
      "a bold wrapped title",
    );
    const actions = (card.actions ?? []) as unknown[];
    p.expect(Array.isArray(actions), "actions: an array");
    (Array.isArray(actions) ? actions : []).forEach((x, i) => {
      const action = x as Record<string, unknown>;
      p.expect(action?.type === "Action.OpenUrl", `actions[${i}].type`);
      p.text(action?.title, 200, `actions[${i}].title`);
      p.url(action?.url, `actions[${i}].url`);
    });
    return { seen: { ...j, card }, reply: { status: 202, body: "" } };
  };

// --- Discord: execute webhook (?wait=true), embed limits

export function discordEmbedTotal(embed: Record<string, unknown>): number {
  const fields = (embed.fields ?? []) as { name?: string; value?: string }[];
  const footer = embed.footer as { text?: string } | undefined;
  const author = embed.author as { name?: string } | undefined;
  return (
    String(embed.title ?? "").length +
    String(embed.description ?? "").length +
    fields.reduce((n, f) => n + String(f.name ?? "").length + String(f.value ?? "").length, 0) +
    String(footer?.text ?? "").length +
    String(author?.name ?? "").length
  );
}

export const discordContract =
  (path: string, query: Record<string, string>): Contract =>
  (got, p) => {
    const j = jsonBody(got, p);
    const u = new URL(got.path, "http://x");
    p.expect(u.pathname === path, `path ${u.pathname}, expected ${path}`);
    p.expect(u.searchParams.get("wait") === "true", "wait=true must be in the query");
    for (const [k, v] of Object.entries(query))
      p.expect(u.searchParams.get(k) === v, `the query's ${k} must be kept`);
    if (j.content !== undefined) p.text(j.content, 2000, "content", 0);
    const mentions = j.allowed_mentions as Record<string, unknown>;
    p.expect(
      isRecord(mentions) && Array.isArray(mentions.parse) && mentions.parse.length === 0,
      "allowed_mentions.parse must be []",
    );
    const embeds = (j.embeds ?? []) as unknown[];
    p.expect(Array.isArray(embeds) && embeds.length <= 10, "embeds: at most 10");
    p.expect(j.content || (Array.isArray(embeds) && embeds.length), "content or embeds");
    let total = 0;
    (Array.isArray(embeds) ? embeds : []).forEach((e, i) => {
      const embed = e as Record<string, unknown>;
      const w = `embeds[${i}]`;
      if (embed.title !== undefined) p.text(embed.title, 256, `${w}.title`);
      if (embed.description !== undefined) p.text(embed.description, 4096, `${w}.description`);
      if (embed.url !== undefined) p.url(embed.url, `${w}.url`);
      if (embed.color !== undefined)
        p.expect(
          Number.isInteger(embed.color) &&
            (embed.color as number) >= 0 &&
            (embed.color as number) <= 0xffffff,
          `${w}.color`,
        );
      if (embed.timestamp !== undefined)
        p.expect(
          typeof embed.timestamp === "string" && !Number.isNaN(Date.parse(embed.timestamp)),
          `${w}.timestamp ISO8601`,
        );
      const fields = (embed.fields ?? []) as unknown[];
      p.expect(Array.isArray(fields) && fields.length <= 25, `${w}.fields: at most 25`);
      (Array.isArray(fields) ? fields : []).forEach((f, k) => {
        const field = f as Record<string, unknown>;
        p.text(field?.name, 256, `${w}.fields[${k}].name`);
        p.text(field?.value, 1024, `${w}.fields[${k}].value`);
      });
      if (embed.footer !== undefined)
        p.text((embed.footer as Record<string, unknown>)?.text, 2048, `${w}.footer.text`);
      total += discordEmbedTotal(embed);
    });
    p.expect(total <= 6000, `the embeds have ${total} characters, more than 6000`);
    const message = {
      id: "1251154424452341791",
      type: 0,
      content: j.content ?? "",
      channel_id: "1251150000000000000",
      author: { id: "1251150000000000001", username: "Vigil", bot: true },
      embeds: j.embeds ?? [],
      webhook_id: "1251150000000000001",
      timestamp: new Date().toISOString(),
    };
    return { seen: j, reply: json(200, message) };
  };

// --- PagerDuty: Events API v2

const PD_ACTIONS = ["trigger", "acknowledge", "resolve"];
const PD_SEVERITIES = ["critical", "error", "warning", "info"];

export const pagerdutyContract = (): Contract => (got, p) => {
  const j = jsonBody(got, p);
  p.expect(got.path === "/v2/enqueue", `path ${got.path}, expected /v2/enqueue`);
  p.expect(
    typeof j.routing_key === "string" && /^[a-zA-Z0-9]{32}$/.test(j.routing_key),
    "routing_key: 32 letters and digits",
  );
  p.expect(PD_ACTIONS.includes(j.event_action as string), `event_action ${String(j.event_action)}`);
  p.text(j.dedup_key, 255, "dedup_key");
  if (j.event_action === "trigger") {
    const payload = j.payload as Record<string, unknown>;
    if (p.expect(isRecord(payload), "a trigger needs a payload")) {
      p.text(payload.summary, 1024, "payload.summary");
      p.text(payload.source, 10_000, "payload.source");
      p.expect(
        PD_SEVERITIES.includes(payload.severity as string),
        `payload.severity ${String(payload.severity)}`,
      );
      if (payload.timestamp !== undefined)
        p.expect(
          typeof payload.timestamp === "string" && !Number.isNaN(Date.parse(payload.timestamp)),
          "payload.timestamp ISO 8601",
        );
      for (const k of ["component", "group", "class"])
        if (payload[k] !== undefined) p.text(payload[k], 10_000, `payload.${k}`);
      if (payload.custom_details !== undefined)
        p.expect(isRecord(payload.custom_details), "payload.custom_details: an object");
      p.only(
        payload,
        ["summary", "source", "severity", "timestamp", "component", "group", "class", "custom_details"],
        "payload",
      );
    }
    const links = (j.links ?? []) as unknown[];
    p.expect(Array.isArray(links), "links: an array");
    (Array.isArray(links) ? links : []).forEach((l, i) =>
      p.url((l as Record<string, unknown>)?.href, `links[${i}].href`),
    );
  } else {
    p.expect(j.payload === undefined, "payload only on trigger");
  }
  p.only(
    j,
    ["routing_key", "event_action", "dedup_key", "payload", "links", "images", "client", "client_url"],
    "the event",
  );
  p.expect(got.raw.length <= 512 * 1024, "the event is larger than 512 KB");
  return {
    seen: j,
    reply: json(202, { status: "success", message: "Event processed", dedup_key: j.dedup_key }),
  };
};

// --- Opsgenie: Alert API

const OG_PRIORITIES = ["P1", "P2", "P3", "P4", "P5"];

export const opsgenieContract =
  (apiKey: string): Contract =>
  (got, p) => {
    const j = jsonBody(got, p);
    p.expect(got.headers.authorization === `GenieKey ${apiKey}`, "Authorization: GenieKey <api key>");
    const u = new URL(got.path, "http://x");
    const seen: Record<string, unknown> = { ...j };
    if (u.pathname === "/v2/alerts") {
      seen.action = "create";
      p.expect(u.search === "", "no query on create");
      p.text(j.message, 130, "message");
      if (j.alias !== undefined) p.text(j.alias, 512, "alias");
      if (j.description !== undefined) p.text(j.description, 15_000, "description");
      if (j.entity !== undefined) p.text(j.entity, 512, "entity");
      if (j.source !== undefined) p.text(j.source, 100, "source");
      if (j.priority !== undefined)
        p.expect(OG_PRIORITIES.includes(j.priority as string), `priority ${String(j.priority)}`);
      const tags = (j.tags ?? []) as unknown[];
      p.expect(Array.isArray(tags) && tags.length <= 20, "tags: at most 20");
      (Array.isArray(tags) ? tags : []).forEach((tag, i) => p.text(tag, 50, `tags[${i}]`));
      if (j.details !== undefined) {
        p.expect(isRecord(j.details), "details: a map");
        for (const [k, v] of Object.entries(isRecord(j.details) ? j.details : {}))
          p.expect(typeof v === "string", `details.${k} must be a string`);
        p.expect(JSON.stringify(j.details).length <= 8000, "details: at most 8000 characters");
      }
      p.only(
        j,
        [
          "message",
          "alias",
          "description",
          "responders",
          "visibleTo",
          "actions",
          "tags",
          "details",
          "entity",
          "source",
          "priority",
          "user",
          "note",
        ],
        "create",
      );
    } else {
      const m = /^\/v2\/alerts\/([^/]+)\/(acknowledge|close)$/.exec(u.pathname);
      if (
        p.expect(m, `path ${u.pathname}: expected /v2/alerts, or /v2/alerts/<alias>/(acknowledge|close)`) &&
        m
      ) {
        seen.action = m[2];
        seen.alias = decodeURIComponent(m[1] ?? "");
        p.text(seen.alias, 512, "the alias in the path");
        p.expect(u.searchParams.get("identifierType") === "alias", "identifierType=alias");
        if (j.source !== undefined) p.text(j.source, 100, "source");
        if (j.user !== undefined) p.text(j.user, 100, "user");
        if (j.note !== undefined) p.text(j.note, 25_000, "note");
        p.only(j, ["source", "user", "note"], m[2] ?? "action");
      }
    }
    return {
      seen,
      reply: json(202, { result: "Request will be processed", took: 0.012, requestId: randomUUID() }),
    };
  };

// --- Telegram: Bot API sendMessage, HTML parse mode

const TG_TAGS = [
  "b",
  "strong",
  "i",
  "em",
  "u",
  "ins",
  "s",
  "strike",
  "del",
  "span",
  "tg-spoiler",
  "a",
  "tg-emoji",
  "code",
  "pre",
  "blockquote",
];
const TG_ENTITIES: Record<string, string> = { lt: "<", gt: ">", amp: "&", quot: '"' };

/** Telegram's HTML: only its tags, balanced; `<`, `>`, `&` outside tags only as entities. The visible text. */
export function telegramHtml(html: string, p: Problems): string {
  let visible = "";
  const stack: string[] = [];
  let i = 0;
  while (i < html.length) {
    const c = html[i] ?? "";
    if (c === "<") {
      const m = /^<(\/?)([a-z-]+)((?:\s+[a-z-]+="[^"<>]*")*)\s*>/.exec(html.slice(i));
      if (!p.expect(m, `a raw < at ${i}`) || !m) {
        i++;
        continue;
      }
      const [whole, close, tag = ""] = m;
      p.expect(TG_TAGS.includes(tag), `the tag <${tag}> is not Telegram's`);
      if (close) p.expect(stack.pop() === tag, `</${tag}> closes nothing open`);
      else stack.push(tag);
      i += whole.length;
      continue;
    }
    if (c === "&") {
      const m = /^&(lt|gt|amp|quot|#\d+|#x[0-9a-fA-F]+);/.exec(html.slice(i));
      if (!p.expect(m, `a raw & at ${i}`) || !m) {
        i++;
        continue;
      }
      const name = m[1] ?? "";
      visible +=
        TG_ENTITIES[name] ??
        String.fromCodePoint(Number(name.startsWith("#x") ? `0x${name.slice(2)}` : name.slice(1)));
      i += m[0].length;
      continue;
    }
    p.expect(c !== ">", `a raw > at ${i}`);
    visible += c;
    i++;
  }
  p.expect(stack.length === 0, `unclosed tags: ${stack.join(", ")}`);
  return visible;
}

export const telegramContract =
  (token: string): Contract =>
  (got, p) => {
    const j = jsonBody(got, p);
    p.expect(got.path === `/bot${token}/sendMessage`, "path /bot<token>/sendMessage");
    p.only(
      j,
      [
        "business_connection_id",
        "chat_id",
        "message_thread_id",
        "text",
        "parse_mode",
        "entities",
        "link_preview_options",
        "disable_notification",
        "protect_content",
        "reply_parameters",
        "reply_markup",
      ],
      "sendMessage",
    );
    p.expect(
      (typeof j.chat_id === "number" && Number.isInteger(j.chat_id)) ||
        (typeof j.chat_id === "string" && /^(-?\d+|@\w{4,32})$/.test(j.chat_id)),
      "chat_id: an integer or @channelusername",
    );
    p.expect(j.parse_mode === "HTML", "parse_mode HTML");
    const lpo = j.link_preview_options as Record<string, unknown>;
    p.expect(isRecord(lpo) && lpo.is_disabled === true, "link_preview_options.is_disabled");
    let visible = "";
    if (p.text(j.text, 100_000, "text")) {
      visible = telegramHtml(j.text as string, p);
      p.expect(visible.trim().length >= 1, "the text is empty after entity parsing");
      p.expect(
        visible.length <= 4096,
        `the text is ${visible.length} characters after entity parsing, more than 4096`,
      );
    }
    const result = {
      message_id: 42,
      sender_chat: { id: -1001234567890, title: "Alerts", type: "channel" },
      chat: {
        id: typeof j.chat_id === "number" ? j.chat_id : -1001234567890,
        title: "Alerts",
        type: "channel",
      },
      date: Math.floor(Date.now() / 1000),
      text: visible,
    };
    return { seen: { ...j, visible }, reply: json(200, { ok: true, result }) };
  };

// --- ntfy: publish as text/plain with headers

/** RFC 2047 `B`/`Q` encoded-words decoded; white space between adjacent encoded-words dropped. */
export function decodeRfc2047(value: string): string {
  const word = /=\?([^?]+)\?([BbQq])\?([^?]*)\?=/g;
  return value
    .replace(/(\?=)\s+(=\?)/g, "$1$2")
    .replace(word, (_, charset: string, enc: string, text: string) => {
      if (!/^utf-8$/i.test(charset)) return "\uFFFD";
      const bytes =
        enc.toUpperCase() === "B"
          ? Buffer.from(text, "base64")
          : Buffer.from(
              text
                .replace(/_/g, " ")
                .replace(/=([0-9A-F]{2})/gi, (_m, h: string) => String.fromCharCode(parseInt(h, 16))),
              "latin1",
            );
      return bytes.toString("utf8");
    });
}

export const ntfyContract =
  (path: string, token?: string): Contract =>
  (got, p) => {
    p.expect(got.method === "POST" || got.method === "PUT", `method ${got.method}`);
    p.expect(got.path === path, `path ${got.path}, expected ${path}`);
    p.expect(/^text\/plain\b/.test(got.headers["content-type"] ?? ""), "content-type text/plain");
    p.expect(
      got.raw.length <= 4096,
      `the message is ${got.raw.length} bytes; ntfy makes more than 4096 an attachment`,
    );
    p.expect(
      Buffer.from(got.body, "utf8").equals(got.raw),
      "the message must be UTF-8 (ntfy makes other bytes an attachment)",
    );
    for (const [k, v] of Object.entries(got.headers))
      for (const one of Array.isArray(v) ? v : [v ?? ""])
        p.expect(/^[\x20-\x7e]*$/.test(one), `the ${k} header has non-ASCII or control characters`);
    const title = decodeRfc2047(String(got.headers.title ?? ""));
    for (const w of String(got.headers.title ?? "").match(/=\?[^?]+\?[BbQq]\?[^?]*\?=/g) ?? [])
      p.expect(w.length <= 75, "an encoded-word is longer than 75 characters");
    const priority = got.headers.priority;
    p.expect(priority === undefined || /^[1-5]$/.test(String(priority)), `Priority ${String(priority)}`);
    const tags = String(got.headers.tags ?? "");
    p.expect(tags === "" || /^[a-z0-9_+-]+(,[a-z0-9_+-]+)*$/i.test(tags), `Tags ${tags}`);
    if (got.headers.click !== undefined) p.url(got.headers.click, "Click");
    if (token) p.expect(got.headers.authorization === `Bearer ${token}`, "Authorization: Bearer <token>");
    else p.expect(got.headers.authorization === undefined, "no Authorization without a token");
    const now = Math.floor(Date.now() / 1000);
    const message = {
      id: "hwQ2YpKdmg",
      time: now,
      expires: now + 43200,
      event: "message",
      topic: path.split("/").at(-1),
      title,
      message: got.body,
      priority: Number(priority ?? 3),
      tags: tags ? tags.split(",") : undefined,
      click: got.headers.click,
    };
    return {
      seen: { title, priority: Number(priority ?? 3), tags: tags.split(","), message: got.body },
      reply: json(200, message),
    };
  };
