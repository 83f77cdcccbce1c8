import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import t from "tap";
import { adminSocketPath, sendToAdminSocket, startAdminSocket } from "../src/admin/socket.js";
import { createLogger } from "../src/lib/logger.js";

t.test("admin socket: an oversized request gets an answer naming the limit", async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "vigil-admin-"));
  const server = await startAdminSocket(
    dir,
    () => {
      throw new Error("no command should run");
    },
    createLogger("silent"),
  );
  t.teardown(() => {
    server.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  t.equal(fs.statSync(adminSocketPath(dir)).mode & 0o777, 0o600, "only the owner may connect");

  // a raw oversized request: answered, not dropped
  const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
    const req = http.request({ socketPath: adminSocketPath(dir), method: "POST", path: "/" }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => {
        body += c;
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on("error", reject);
    req.end(JSON.stringify({ argv: ["user", "create", "--email", "x".repeat(100 * 1024)] }));
  });
  t.equal(answer.status, 413);
  t.match(JSON.parse(answer.body), { ok: false, error: /larger than 64 KiB/ });

  // the CLI side refuses before sending
  t.match(await sendToAdminSocket(dir, ["user", "create", "--email", "y".repeat(70 * 1024)]), {
    ok: false,
    error: /larger than 64 KiB/,
  });
});
