import t from "tap";
import { reencryptCredentials } from "../../src/admin/reencrypt.js";
import { addMember, createKey } from "../../src/identity/accounts.js";
import { CredentialBox } from "../../src/lib/credentials.js";
import { MAX_WEBHOOKS_PER_ACCOUNT } from "../../src/webhooks/webhooks.js";
import { testApp } from "../helpers/app.js";
import { requireBackend } from "../helpers/backends.js";
import { call, seedTenants } from "../helpers/tenants.js";

/**
 * POST/GET/DELETE /v1/webhooks (issue #14, point 5; docs/webhooks.md): the secret is shown once,
 * URL and secret are stored encrypted, each account sees and removes only its own webhooks (an
 * organization's need its admin or owner), and every bad URL is a 400 naming body.url.
 */

const ABSENT = "00000000-0000-4000-8000-000000000000";
const TOKEN = "T0KEN-in-the-path-9f2c";

interface Created {
  id: string;
  url: string;
  secret: string;
  origin: string;
  url_hint: string;
  created_at: string;
}

for (const backend of ["pglite", "postgres"] as const) {
  t.test(`add, list and remove webhooks; the secret is shown once (${backend})`, async (t) => {
    if (!(await requireBackend(t, backend))) return;
    const ta = await testApp(t, { relational: backend });
    const { app, ctx } = ta;
    const w = await seedTenants(ta);
    const alice = w.keys.alicePersonal;

    const url = `https://hooks.example.com/services/${TOKEN}?channel=ops`;
    const res = await call(app, alice, "POST", "/v1/webhooks", { url });
    t.equal(res.statusCode, 201, res.body);
    const made = res.json() as Created;
    t.match(made, {
      id: /^[0-9a-f-]{36}$/,
      url,
      secret: /^whsec_[A-Za-z0-9_-]{43}$/,
      origin: "https://hooks.example.com",
      url_hint: "https://hooks.example.com/…=ops",
      created_at: String,
    });

    // listed without URL and secret
    const list = await call(app, alice, "GET", "/v1/webhooks");
    t.equal(list.statusCode, 200);
    t.same(list.json(), {
      webhooks: [{ id: made.id, origin: made.origin, url_hint: made.url_hint, created_at: made.created_at }],
    });
    t.notOk(list.body.includes(made.secret), "GET never shows the secret");
    t.notOk(list.body.includes(TOKEN), "nor the URL's token");
    const readOnly = await call(app, w.keys.aliceReadOnly, "GET", "/v1/webhooks");
    t.equal(readOnly.statusCode, 200, "a connections:read key lists them");
    t.equal(
      (await call(app, w.keys.aliceReadOnly, "POST", "/v1/webhooks", { url: "https://x.example/h" }))
        .statusCode,
      403,
      "but cannot add one",
    );

    // at rest: encrypted with the credential box, nothing of the secret or token in the clear
    const row = (
      await ctx.stores.db.query<Record<string, unknown>>("SELECT * FROM webhooks WHERE id = $1", [made.id])
    ).rows[0];
    t.ok(row, "stored");
    const stored = JSON.stringify(row);
    t.notOk(stored.includes(made.secret.slice(6)), "the secret is not stored in plaintext");
    t.notOk(stored.includes(TOKEN), "nor the URL");
    t.match(row, { url_enc: /^v1\./, secret_enc: /^v1\./, url_origin: "https://hooks.example.com" });
    t.equal(ctx.credentials.decrypt(row?.secret_enc as string), made.secret, "the box opens the secret");
    t.equal(ctx.credentials.decrypt(row?.url_enc as string), url, "and the URL");

    // tenancy: other accounts neither see nor remove it; an absent one is the same 404
    for (const key of [w.keys.carolPersonal, w.keys.bobPersonal, w.keys.aliceOrgA]) {
      const other = await call(app, key, "GET", "/v1/webhooks");
      t.same(other.json(), { webhooks: [] }, "another account lists none of alice's");
      const del = await call(app, key, "DELETE", `/v1/webhooks/${made.id}`);
      t.equal(del.statusCode, 404, "another account's webhook is not found");
      t.match(del.json(), { success: false, error: { code: "NOT_FOUND", message: /Webhook .* not found/ } });
    }
    const absent = await call(app, alice, "DELETE", `/v1/webhooks/${ABSENT}`);
    t.same(
      [absent.statusCode, absent.json().error.code],
      [404, "NOT_FOUND"],
      "an absent one answers the same",
    );
    const badId = await call(app, alice, "DELETE", "/v1/webhooks/not-a-uuid");
    t.equal(badId.statusCode, 400);
    t.match(badId.json().error.message, /^params\.id: /);

    // removed by its account
    const del = await call(app, alice, "DELETE", `/v1/webhooks/${made.id}`);
    t.equal(del.statusCode, 200);
    t.same(del.json(), { id: made.id, deleted: true });
    t.same((await call(app, alice, "GET", "/v1/webhooks")).json(), { webhooks: [] });
    t.equal((await call(app, alice, "DELETE", `/v1/webhooks/${made.id}`)).statusCode, 404, "gone");
  });
}

t.test("an organization's webhooks: its keys see them; only admins and owners change them", async (t) => {
  const ta = await testApp(t);
  const { app, ctx } = ta;
  const w = await seedTenants(ta);
  // an organization key is made by an admin; dave made one, then became a plain member again
  await addMember(ctx.stores.db, { org: w.orgs.orgA.id, user: w.users.dave.id, role: "admin" });
  const daveOrg = (
    await createKey(ctx.stores.db, {
      user: w.users.dave.id,
      org: w.orgs.orgA.id,
      permissions: ["connections:read", "connections:write"],
    })
  ).key;
  await addMember(ctx.stores.db, { org: w.orgs.orgA.id, user: w.users.dave.id, role: "member" });
  const org = await call(app, w.keys.aliceOrgA, "POST", "/v1/webhooks", {
    url: "https://org-a.example/hook",
  });
  t.equal(org.statusCode, 201, "the owner's organization key adds one");
  const id = (org.json() as Created).id;

  t.same(
    ((await call(app, daveOrg, "GET", "/v1/webhooks")).json() as { webhooks: { id: string }[] }).webhooks.map(
      (x) => x.id,
    ),
    [id],
    "a member's organization key lists the organization's",
  );
  const add = await call(app, daveOrg, "POST", "/v1/webhooks", { url: "https://dave.example/hook" });
  t.equal(add.statusCode, 403);
  t.match(add.json().error, {
    code: "FORBIDDEN",
    message: /admins and owners .* this key's user is a member/,
  });
  const del = await call(app, daveOrg, "DELETE", `/v1/webhooks/${id}`);
  t.equal(del.statusCode, 403, "nor removes one");
  t.same(
    ((await call(app, w.keys.alicePersonal, "GET", "/v1/webhooks")).json() as { webhooks: unknown[] })
      .webhooks,
    [],
    "alice's personal account is another account",
  );
  const own = await call(app, w.keys.davePersonal, "POST", "/v1/webhooks", {
    url: "https://dave.example/hook",
  });
  t.equal(own.statusCode, 201, "dave's personal key adds one to his own account");
  t.equal((await call(app, w.keys.aliceOrgA, "DELETE", `/v1/webhooks/${id}`)).statusCode, 200);
  t.equal(
    (await call(app, w.keys.ingest, "GET", "/v1/webhooks")).statusCode,
    403,
    "a usage-ingestion key has no webhooks",
  );
});

t.test("at most 10 webhooks per account, one per URL: 409", async (t) => {
  const ta = await testApp(t);
  const { app } = ta;
  const w = await seedTenants(ta);
  const bob = w.keys.bobPersonal;
  const ids: string[] = [];
  for (let i = 0; i < MAX_WEBHOOKS_PER_ACCOUNT; i++) {
    const r = await call(app, bob, "POST", "/v1/webhooks", { url: `https://hooks.example.com/bob/${i}` });
    t.equal(r.statusCode, 201);
    ids.push((r.json() as Created).id);
  }
  const full = await call(app, bob, "POST", "/v1/webhooks", { url: "https://hooks.example.com/bob/extra" });
  t.equal(full.statusCode, 409);
  t.match(full.json().error, {
    code: "CONFLICT",
    message: /at most 10 webhooks and this one has 10; delete one/,
  });
  t.equal(
    (await call(app, w.keys.bobOrgB, "POST", "/v1/webhooks", { url: "https://hooks.example.com/b" }))
      .statusCode,
    201,
    "the organization is an account of its own",
  );
  await call(app, bob, "DELETE", `/v1/webhooks/${ids[0]}`);
  const dup = await call(app, bob, "POST", "/v1/webhooks", { url: "https://hooks.example.com/bob/3" });
  t.equal(dup.statusCode, 409);
  t.match(dup.json().error.message, /^body\.url: this account already has a webhook for this URL \(id /);
  t.equal(
    (await call(app, bob, "POST", "/v1/webhooks", { url: "https://hooks.example.com/bob/extra" })).statusCode,
    201,
    "room again after a delete",
  );
});

t.test("bad webhook URLs and bodies: 400 naming url, never a 500", async (t) => {
  const strict = await testApp(t, { env: { PUBLIC_URL: "https://vigil.example.com" } });
  const loose = await testApp(t, { env: { WEBHOOK_ALLOW_HTTP_LOOPBACK: "true" } });
  const keys = {
    strict: (await seedTenants(strict)).keys.alicePersonal,
    loose: (await seedTenants(loose)).keys.alicePersonal,
  };
  const cases: ["strict" | "loose", string, unknown, RegExp][] = [
    [
      "strict",
      "http to a public host",
      { url: "http://hooks.example.com/x" },
      /^body\.url: must be an https URL; plain http is accepted only to a loopback host$/,
    ],
    [
      "loose",
      "http to a public host, even with the flag",
      { url: "http://10.0.0.5/x" },
      /^body\.url: must be an https URL/,
    ],
    [
      "strict",
      "http to loopback without the flag",
      { url: "http://127.0.0.1:9999/x" },
      /^body\.url: .*needs WEBHOOK_ALLOW_HTTP_LOOPBACK=true/,
    ],
    [
      "strict",
      "http to localhost without the flag",
      { url: "http://localhost:9999/x" },
      /WEBHOOK_ALLOW_HTTP_LOOPBACK=true/,
    ],
    [
      "strict",
      "ftp",
      { url: "ftp://files.example.com/x" },
      /^body\.url: must be an https URL; ftp is not supported$/,
    ],
    [
      "strict",
      "javascript:",
      { url: "javascript:alert(1)" },
      /^body\.url: must be an https URL; javascript is not supported$/,
    ],
    ["strict", "a relative path", { url: "/hooks/vigil" }, /^body\.url: must be an absolute URL/],
    ["strict", "no scheme", { url: "hooks.example.com/vigil" }, /^body\.url: must be an absolute URL/],
    [
      "strict",
      "user and password",
      { url: "https://user:pass@hooks.example.com/x" },
      /^body\.url: must not contain a user name or password/,
    ],
    [
      "strict",
      "a user name alone",
      { url: "https://user@hooks.example.com/x" },
      /^body\.url: must not contain a user name or password/,
    ],
    [
      "strict",
      "the service's PUBLIC_URL",
      { url: "https://vigil.example.com/v1/webhooks" },
      /^body\.url: must not point at this Vigil service itself/,
    ],
    [
      "strict",
      "the service's PUBLIC_URL, explicit port",
      { url: "https://VIGIL.example.com:443/x" },
      /must not point at this Vigil service itself/,
    ],
    [
      "loose",
      "loopback on the service's port",
      { url: "http://127.0.0.1:8080/v1/connections" },
      /must not point at this Vigil service itself/,
    ],
    [
      "loose",
      "localhost on the service's port",
      { url: "http://localhost:8080/healthz" },
      /must not point at this Vigil service itself/,
    ],
    [
      "loose",
      "[::1] on the service's port",
      { url: "http://[::1]:8080/" },
      /must not point at this Vigil service itself/,
    ],
    [
      "loose",
      "127.1 on the service's port",
      { url: "http://127.1:8080/" },
      /must not point at this Vigil service itself/,
    ],
    [
      "strict",
      "0.0.0.0 on the service's port",
      { url: "https://0.0.0.0:8080/" },
      /must not point at this Vigil service itself/,
    ],
    [
      "strict",
      "too long",
      { url: `https://hooks.example.com/${"a".repeat(2100)}` },
      /^body\.url: must be at most 2048 characters \(it has 2126\)$/,
    ],
    ["strict", "a number", { url: 42 }, /^body\.url: must be a string/],
    ["strict", "an object", { url: { href: "https://x.example" } }, /^body\.url: must be a string/],
    ["strict", "a list", { url: ["https://x.example"] }, /^body\.url: must be a string/],
    ["strict", "null", { url: null }, /^body\.url: is required/],
    ["strict", "empty", { url: "  " }, /^body\.url: must not be empty/],
    ["strict", "missing", {}, /^body\.url: is required: send \{"url": "https:\/\/…"\}/],
    [
      "strict",
      "an unknown field",
      { url: "https://x.example/h", secret: "mine" },
      /^body\.secret: is not a known field: send \{"url"/,
    ],
    ["strict", "not an object", ["https://x.example/h"], /^body: must be a JSON object: send \{"url"/],
  ];
  for (const [which, what, body, message] of cases) {
    const app = which === "strict" ? strict.app : loose.app;
    const r = await call(app, keys[which], "POST", "/v1/webhooks", body);
    t.equal(r.statusCode, 400, `${what}: 400`, { body: r.body });
    t.match(r.json(), { success: false, error: { code: "VALIDATION_ERROR", message } }, what);
  }
  const none = await strict.app.inject({
    method: "POST",
    url: "/v1/webhooks",
    headers: { authorization: `Bearer ${keys.strict}` },
  });
  t.equal(none.statusCode, 400, "no body at all");
  t.match(none.json().error.message, /url/);
  const text = await strict.app.inject({
    method: "POST",
    url: "/v1/webhooks",
    headers: { authorization: `Bearer ${keys.strict}`, "content-type": "text/plain" },
    payload: "https://hooks.example.com/x",
  });
  t.ok(text.statusCode >= 400 && text.statusCode < 500, `a text body: ${text.statusCode}`);

  // what is allowed
  for (const [which, url] of [
    ["strict", "https://hooks.example.com/x"],
    ["strict", "https://127.0.0.1:9443/x"],
    ["loose", "http://127.0.0.1:9999/x"],
    ["loose", "http://localhost:9999/x"],
    ["loose", "http://[::1]:9999/x"],
  ] as const) {
    const app = which === "strict" ? strict.app : loose.app;
    const r = await call(app, keys[which], "POST", "/v1/webhooks", { url });
    t.equal(r.statusCode, 201, `${which}: ${url} is accepted`, { body: r.body });
  }
  t.equal(
    (await strict.ctx.stores.db.query("SELECT 1 FROM webhooks")).rows.length,
    2,
    "nothing stored for a refused URL",
  );
});

t.test("vigil admin reencrypt moves webhook URLs and secrets to the new master secret", async (t) => {
  const OLD = "old-secret-old-secret-old-secret-0123";
  const NEW = "new-secret-new-secret-new-secret-4567";
  const ta = await testApp(t, { env: { VIGIL_SECRET: OLD } });
  const w = await seedTenants(ta);
  const made = (
    await call(ta.app, w.keys.carolPersonal, "POST", "/v1/webhooks", {
      url: "https://hooks.example.com/c/x1",
    })
  ).json() as Created;
  const db = ta.ctx.stores.db;
  const before = await db.query<{ checked: number }>(
    "SELECT count(*)::int AS checked FROM connections WHERE api_key_enc IS NOT NULL OR api_token_enc IS NOT NULL",
  );
  const connections = Number(before.rows[0]?.checked);
  const rotating = new CredentialBox({ current: NEW, previous: [OLD] });
  t.same(await reencryptCredentials(db, rotating), {
    reencrypted: connections + 1,
    checked: connections + 1,
  });
  t.same(
    await reencryptCredentials(db, rotating),
    { reencrypted: 0, checked: connections + 1 },
    "idempotent",
  );
  const row = (
    await db.query<{ url_enc: string; secret_enc: string }>(
      "SELECT url_enc, secret_enc FROM webhooks WHERE id = $1",
      [made.id],
    )
  ).rows[0];
  const fresh = new CredentialBox({ current: NEW, previous: [] });
  t.equal(fresh.decrypt(row?.url_enc as string), made.url, "the URL reads without the old secret");
  t.equal(fresh.decrypt(row?.secret_enc as string), made.secret, "and the secret");
});
