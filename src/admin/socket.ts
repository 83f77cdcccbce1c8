import fs from "node:fs";
import http from "node:http";
import path from "node:path";
import type { Logger } from "pino";
import { AccountError } from "../identity/accounts.js";
import { type AdminDeps, type AdminRequest, parseAdminArgs, runAdmin, UsageError } from "./commands.js";

/**
 * In embedded mode one process owns the PGlite folder, so a running server does the admin
 * command's work: it listens on `VIGIL_DATA_DIR/admin.sock` (mode 0600, so only the folder's
 * owner can use it) and `vigil admin` sends its arguments there.
 */
/** Admin requests are a command's arguments: 64 KiB is far more than any needs. */
const MAX_ADMIN_REQUEST = 64 * 1024;
const TOO_LARGE = "the admin command's arguments are larger than 64 KiB; pass shorter values";

export const adminSocketPath = (dataDir: string) => path.join(dataDir, "admin.sock");

export async function startAdminSocket(
  dataDir: string,
  deps: () => AdminDeps,
  log: Logger,
): Promise<http.Server> {
  const file = adminSocketPath(dataDir);
  fs.rmSync(file, { force: true });
  const server = http.createServer((req, res) => {
    let body = "";
    let tooLarge = false;
    req.setEncoding("utf8");
    req.on("data", (c: string) => {
      if (tooLarge) return;
      body += c;
      if (body.length > MAX_ADMIN_REQUEST) {
        tooLarge = true;
        body = "";
      }
    });
    req.on("end", async () => {
      const answer = (status: number, payload: unknown) => {
        res.writeHead(status, { "content-type": "application/json" });
        res.end(JSON.stringify(payload));
      };
      if (tooLarge) {
        answer(413, { ok: false, error: TOO_LARGE });
        return;
      }
      try {
        const argv = JSON.parse(body) as { argv: string[] };
        const request: AdminRequest = parseAdminArgs(argv.argv);
        answer(200, { ok: true, result: await runAdmin(deps(), request) });
        log.info({ command: request.command }, "admin command served");
      } catch (err) {
        const known = err instanceof UsageError || err instanceof AccountError;
        if (!known) log.error({ err }, "admin command failed");
        answer(known ? 400 : 500, {
          ok: false,
          error: known ? (err as Error).message : `internal error: ${(err as Error).message}`,
        });
      }
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(file, () => resolve());
  });
  fs.chmodSync(file, 0o600);
  return server;
}

export function sendToAdminSocket(
  dataDir: string,
  argv: string[],
): Promise<{ ok: boolean; result?: unknown; error?: string }> {
  const payload = JSON.stringify({ argv });
  if (Buffer.byteLength(payload) > MAX_ADMIN_REQUEST) return Promise.resolve({ ok: false, error: TOO_LARGE });
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        socketPath: adminSocketPath(dataDir),
        method: "POST",
        path: "/",
        headers: { "content-type": "application/json" },
        timeout: 30_000,
      },
      (res) => {
        let data = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => {
          data += c;
        });
        res.on("end", () => {
          try {
            resolve(JSON.parse(data));
          } catch {
            reject(new Error("the running server gave an unreadable answer"));
          }
        });
      },
    );
    req.on("error", reject);
    req.on("timeout", () => req.destroy(new Error("the running server did not answer within 30 s")));
    req.end(payload);
  });
}
