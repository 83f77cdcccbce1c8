/**
 * The notification receivers of `vigil bench notify`, in one process of their own so their CPU is
 * not Vigil's and a busy benchmark process does not delay their clocks:
 *   node notify-receivers.js '{"latencyMs":0}'
 * One loopback HTTP server per provider, each answering as the provider does (a real fleet's Slack
 * webhooks all share hooks.slack.com, so one origin per provider):
 *   slack      POST /services/A<account>/B…/…            200 `ok` (text/html)
 *   teams      POST /workflows/A<account>/…/invoke?sig=… 202, empty (a Power Automate Workflows webhook)
 *   discord    POST /api/webhooks/<account>/…?wait=true   200, the message as JSON
 *   pagerduty  POST /v2/enqueue (routing key names the account)  202 {"status":"success",…,"dedup_key"}
 *   ntfy       POST /vigil-a<account>                     200, the message as JSON
 *   webhook    POST /hook/<account>                       204 (a signed webhook of /v1/webhooks: the baseline)
 * Each request's arrival (wall clock, ms, when its body has arrived) is recorded with the
 * provider, the account and the incident it names: PagerDuty's dedup_key
 * (`vigil-incident-<id>`), the "Incident" fact of Slack, Teams and Discord, ntfy's `Incident:`
 * line, a webhook's `incident_id`. `latencyMs` delays every answer (a provider's own time).
 *
 * Prints one JSON line `{ports: {slack, …, control}}` once listening. The control server answers
 * `GET /receipts?from=N` (the receipts from the N-th on, and this process's CPU seconds so far).
 * Stops on SIGTERM/SIGINT.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { pathToFileURL } from "node:url";

export const RECEIVER_KINDS = ["slack", "teams", "discord", "pagerduty", "ntfy", "webhook"] as const;
export type ReceiverKind = (typeof RECEIVER_KINDS)[number];

/** One request received: [arrival ms (wall clock), kind, account (-1: unknown), incident id or null]. */
export type Receipt = [number, ReceiverKind, number, string | null];

/** PagerDuty's routing key of an account: 32 letters and digits. */
export const routingKeyOf = (account: number) => `R${String(account).padStart(31, "0")}`;

/** The settings of each provider channel of `account`, given the receivers' ports. */
export function channelSettings(
  ports: Record<ReceiverKind, number>,
  account: number,
): { type: Exclude<ReceiverKind, "webhook">; settings: Record<string, unknown> }[] {
  const base = (k: ReceiverKind) => `http://127.0.0.1:${ports[k]}`;
  return [
    {
      type: "slack",
      settings: { webhook_url: `${base("slack")}/services/A${account}/B${account}/tok${account}x` },
    },
    {
      type: "teams",
      settings: {
        webhook_url: `${base("teams")}/workflows/A${account}/triggers/manual/paths/invoke?api-version=1&sig=s${account}x`,
      },
    },
    {
      type: "discord",
      settings: { webhook_url: `${base("discord")}/api/webhooks/${account}/tok${account}x` },
    },
    { type: "pagerduty", settings: { routing_key: routingKeyOf(account), api_url: base("pagerduty") } },
    { type: "ntfy", settings: { topic_url: `${base("ntfy")}/vigil-a${account}` } },
  ];
}

const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/;

type Json = Record<string, unknown>;
const asRecord = (v: unknown): Json => (typeof v === "object" && v !== null ? (v as Json) : {});
const asArray = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);

/** The account and incident a request names, per provider. */
function identify(
  kind: ReceiverKind,
  url: string,
  body: string,
): { account: number; incident: string | null } {
  const path = url.split("?")[0] ?? "";
  const num = (re: RegExp, s: string) => {
    const m = re.exec(s);
    return m ? Number(m[1]) : -1;
  };
  try {
    switch (kind) {
      case "slack": {
        const j = JSON.parse(body) as Json;
        let incident: string | null = null;
        for (const b of asArray(j.blocks))
          for (const f of asArray(asRecord(b).fields)) {
            const t = String(asRecord(f).text ?? "");
            if (t.startsWith("*Incident*")) incident = UUID.exec(t)?.[0] ?? null;
          }
        return { account: num(/^\/services\/A(\d+)\//, path), incident };
      }
      case "teams": {
        const j = JSON.parse(body) as Json;
        let incident: string | null = null;
        for (const a of asArray(j.attachments))
          for (const b of asArray(asRecord(asRecord(a).content).body))
            for (const f of asArray(asRecord(b).facts))
              if (asRecord(f).title === "Incident") incident = String(asRecord(f).value);
        return { account: num(/^\/workflows\/A(\d+)\//, path), incident };
      }
      case "discord": {
        const j = JSON.parse(body) as Json;
        let incident: string | null = null;
        for (const e of asArray(j.embeds))
          for (const f of asArray(asRecord(e).fields))
            if (asRecord(f).name === "Incident") incident = UUID.exec(String(asRecord(f).value))?.[0] ?? null;
        return { account: num(/^\/api\/webhooks\/(\d+)\//, path), incident };
      }
      case "pagerduty": {
        const j = JSON.parse(body) as Json;
        const key = String(j.dedup_key ?? "");
        return {
          account: num(/^R0*(\d+)$/, String(j.routing_key ?? "")),
          incident: key.startsWith("vigil-incident-") ? key.slice("vigil-incident-".length) : null,
        };
      }
      case "ntfy":
        return {
          account: num(/^\/vigil-a(\d+)$/, path),
          incident: /^Incident: (\S+)$/m.exec(body)?.[1] ?? null,
        };
      case "webhook": {
        const j = JSON.parse(body) as Json;
        return {
          account: num(/^\/hook\/(\d+)$/, path),
          incident: typeof j.incident_id === "string" ? j.incident_id : null,
        };
      }
    }
  } catch {
    return { account: -1, incident: null };
  }
}

let snowflake = 1_200_000_000_000_000_000n;

/** The provider's answer to an accepted request. */
function answer(kind: ReceiverKind, res: http.ServerResponse, body: string, url: string): void {
  switch (kind) {
    case "slack":
      res.writeHead(200, { "content-type": "text/html" }).end("ok");
      return;
    case "teams":
      res.writeHead(202, { "content-length": "0" }).end();
      return;
    case "discord": {
      const id = String(snowflake++);
      let content = "";
      try {
        content = String((JSON.parse(body) as Json).content ?? "");
      } catch {
        // answered anyway
      }
      res.writeHead(200, { "content-type": "application/json" }).end(
        JSON.stringify({
          id,
          type: 0,
          content,
          channel_id: "1",
          webhook_id: "1",
          timestamp: new Date().toISOString(),
        }),
      );
      return;
    }
    case "pagerduty": {
      let dedup = "";
      try {
        dedup = String((JSON.parse(body) as Json).dedup_key ?? "");
      } catch {
        // answered anyway
      }
      res
        .writeHead(202, { "content-type": "application/json" })
        .end(JSON.stringify({ status: "success", message: "Event processed", dedup_key: dedup }));
      return;
    }
    case "ntfy": {
      const now = Math.floor(Date.now() / 1000);
      res.writeHead(200, { "content-type": "application/json" }).end(
        JSON.stringify({
          id: Math.random().toString(36).slice(2, 14),
          time: now,
          expires: now + 43_200,
          event: "message",
          topic: (url.split("?")[0] ?? "").slice(1),
          message: body.slice(0, 200),
        }),
      );
      return;
    }
    case "webhook":
      res.writeHead(204).end();
      return;
  }
}

async function main(): Promise<void> {
  const o = JSON.parse(process.argv[2] ?? "{}") as { latencyMs?: number };
  const latencyMs = o.latencyMs ?? 0;
  const receipts: Receipt[] = [];
  const servers: http.Server[] = [];
  const listen = (s: http.Server) =>
    new Promise<number>((resolve) =>
      s.listen(0, "127.0.0.1", () => resolve((s.address() as AddressInfo).port)),
    );

  const ports = {} as Record<ReceiverKind | "control", number>;
  for (const kind of RECEIVER_KINDS) {
    const s = http.createServer({ keepAliveTimeout: 30_000 }, (req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const at = performance.timeOrigin + performance.now();
        const body = Buffer.concat(chunks).toString("utf8");
        const url = req.url ?? "/";
        const { account, incident } = identify(kind, url, body);
        receipts.push([at, kind, account, incident]);
        if (latencyMs > 0) setTimeout(() => answer(kind, res, body, url), latencyMs);
        else answer(kind, res, body, url);
      });
    });
    servers.push(s);
    ports[kind] = await listen(s);
  }
  const control = http.createServer((req, res) => {
    const u = new URL(req.url ?? "/", "http://x");
    if (u.pathname === "/receipts") {
      const from = Math.max(0, Number(u.searchParams.get("from") ?? 0) || 0);
      const cpu = process.cpuUsage();
      res.writeHead(200, { "content-type": "application/json" }).end(
        JSON.stringify({
          total: receipts.length,
          cpuSeconds: (cpu.user + cpu.system) / 1e6,
          receipts: receipts.slice(from),
        }),
      );
      return;
    }
    res.writeHead(404).end();
  });
  servers.push(control);
  ports.control = await listen(control);
  process.stdout.write(`${JSON.stringify({ ports })}\n`);

  await new Promise<void>((resolve) => {
    process.once("SIGTERM", resolve);
    process.once("SIGINT", resolve);
  });
  for (const s of servers) s.closeAllConnections();
  await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
  process.exit(0);
}

// run as a script (the benchmark imports the helpers above without starting servers)
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) await main();
