import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import t, { type Test } from "tap";
import { freshDatabaseUrl, requireBackend } from "../helpers/backends.js";
import { serveOnFreePort, spawnVigil } from "../helpers/process.js";

const SECRET = "admin-test-secret-admin-test-secret-42";

async function admin(t: Test, env: Record<string, string>, ...args: string[]) {
  const run = spawnVigil(t, ["admin", ...args], { VIGIL_SECRET: SECRET, LOG_LEVEL: "warn", ...env });
  const { code } = await run.exited(30_000);
  const out = run.output();
  const lines = out.trim().split("\n");
  let json: Record<string, unknown> | undefined;
  try {
    json = JSON.parse(lines[lines.length - 1] ?? "");
  } catch {
    json = undefined;
  }
  return { code, out, json };
}

/** Runs the whole contract against one environment: a user, an org, a member, keys, a revocation. */
async function contract(t: Test, env: Record<string, string>, apiUrl?: string) {
  const owner = await admin(
    t,
    env,
    "create-user",
    "--email",
    "owner@x.example",
    "--plan",
    "pro",
    "--password",
    "long-password",
  );
  t.equal(owner.code, 0, owner.out);
  t.match(owner.json, { id: String, email: "owner@x.example", plan: "pro" });
  t.same(Object.keys(owner.json ?? {}).sort(), ["email", "id", "plan"]);
  const ownerId = owner.json?.id as string;
  const member = await admin(t, env, "create-user", "--email", "member@x.example");
  t.equal(member.json?.plan, "free", "plan defaults to free");

  const org = await admin(t, env, "create-org", "--name", "Acme", "--owner", ownerId, "--plan", "scale");
  t.match(org.json, { id: String, name: "Acme", plan: "scale" });
  const orgId = org.json?.id as string;
  const add = await admin(
    t,
    env,
    "add-member",
    "--org",
    orgId,
    "--user",
    member.json?.id as string,
    "--role",
    "member",
  );
  t.same(add.json, { org_id: orgId, user_id: member.json?.id, role: "member" });

  const personal = await admin(
    t,
    env,
    "create-key",
    "--user",
    ownerId,
    "--permissions",
    "connections:read,usage:read",
    "--name",
    "ci",
  );
  t.match(personal.json, {
    id: String,
    key: /^vgl_/,
    kind: "personal",
    permissions: ["connections:read", "usage:read"],
  });
  const orgKey = await admin(t, env, "create-key", "--user", ownerId, "--org", orgId);
  t.match(orgKey.json, {
    kind: "organization",
    permissions: [
      "connections:read",
      "connections:write",
      "connections:delete",
      "usage:read",
      "usage:write",
      "analytics:read",
    ],
  });
  const memberOrgKey = await admin(t, env, "create-key", "--user", member.json?.id as string, "--org", orgId);
  t.equal(memberOrgKey.code, 1, "a plain member cannot mint an organization key");
  t.match(memberOrgKey.out, /admin or owner role/);

  if (apiUrl) {
    const ok = await fetch(`${apiUrl}/v1/connections`, {
      headers: { authorization: `Bearer ${personal.json?.key}` },
    });
    t.equal(ok.status, 200, "the new key works against the running server");
  }
  const revoked = await admin(t, env, "revoke-key", "--id", personal.json?.id as string);
  t.same(revoked.json, { id: personal.json?.id, revoked: true });
  if (apiUrl) {
    const after = await fetch(`${apiUrl}/v1/connections`, {
      headers: { authorization: `Bearer ${personal.json?.key}` },
    });
    t.equal(after.status, 401, "revoked at once on the server that served the command");
  }

  // errors: stderr and a non-zero exit, nothing on stdout
  const dup = await admin(t, env, "create-user", "--email", "owner@x.example");
  t.equal(dup.code, 1);
  t.match(dup.out, /already exists/);
  const usage = await admin(t, env, "create-org", "--name", "x");
  t.equal(usage.code, 2);
  t.match(usage.out, /--owner is required/);
  const perm = await admin(t, env, "create-key", "--user", ownerId, "--permissions", "connections:admin");
  t.equal(perm.code, 2);
  t.match(perm.out, /unknown permission "connections:admin"/);
  const unknown = await admin(t, env, "drop-everything");
  t.equal(unknown.code, 2);
  const noKey = await admin(t, env, "revoke-key", "--id", "nope");
  t.equal(noKey.code, 1);
  t.match(noKey.out, /no API key with id nope/);
}

// about 40 s on a quiet host; each command is a process of its own, so a loaded CI host can take
// several times that (once 189 s, past tap's default 180 s)
t.setTimeout(480_000);

t.test("admin on PostgreSQL, with no server running", async (t) => {
  if (!(await requireBackend(t, "postgres"))) return;
  await contract(t, { DATABASE_URL: await freshDatabaseUrl(t) });
});

t.test("admin on the embedded default, with and without a running server", async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "vigil-admin-"));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const env = { VIGIL_DATA_DIR: dir };

  // no server: the command opens the folder itself
  const alone = await admin(t, env, "create-user", "--email", "first@x.example");
  t.equal(alone.code, 0, alone.out);

  // a running server holds the folder: it serves the commands over its socket
  const server = await serveOnFreePort(t, { ...env, VIGIL_SECRET: SECRET, LOG_LEVEL: "info" });
  await server.waitFor(/series store ready/);
  await new Promise((r) => setTimeout(r, 300));
  await contract(t, env, server.url);
  t.match(server.output(), /admin command served/);

  server.proc.kill("SIGTERM");
  t.equal((await server.exited()).code, 0);
  // the server wrote through the same folder: after it stops, the data is all there
  const again = await admin(t, env, "create-user", "--email", "member@x.example");
  t.equal(again.code, 1, "the user created through the server persisted");
  t.match(again.out, /already exists/);
});
