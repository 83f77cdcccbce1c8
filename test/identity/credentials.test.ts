import { Writable } from "node:stream";
import t from "tap";
import { reencryptCredentials } from "../../src/admin/reencrypt.js";
import { createKey, createUser } from "../../src/identity/accounts.js";
import { hashPassword, verifyPassword } from "../../src/identity/passwords.js";
import { PERMISSIONS } from "../../src/core/actor.js";
import { CredentialBox } from "../../src/lib/credentials.js";
import { testApp } from "../helpers/app.js";
import { freshRelational } from "../helpers/backends.js";
import { call } from "../helpers/tenants.js";

const OLD = "old-secret-old-secret-old-secret-0000";
const NEW = "new-secret-new-secret-new-secret-1111";

t.test("AES-256-GCM credentials: round trip, tamper-evident, rotation", async (t) => {
  const box = new CredentialBox({ current: OLD, previous: [] });
  const enc = box.encrypt("hunter2-api-key");
  t.not(enc, box.encrypt("hunter2-api-key"), "a fresh IV each time");
  t.equal(box.decrypt(enc), "hunter2-api-key");
  const parts = enc.split(".");
  // change the first character of the ciphertext (to another one: 1 in 64 already is "A")
  const ct = parts[4] as string;
  parts[4] = `${ct.startsWith("A") ? "B" : "A"}${ct.slice(1)}`;
  t.throws(() => box.decrypt(parts.join(".")), "a modified ciphertext does not decrypt");
  t.throws(() => new CredentialBox({ current: NEW, previous: [] }).decrypt(enc), /VIGIL_PREVIOUS_SECRETS/);
  const rotated = new CredentialBox({ current: NEW, previous: [OLD] });
  t.equal(rotated.decrypt(enc), "hunter2-api-key", "old credentials still read during a rotation");
  t.not(rotated.kidOf(rotated.encrypt("x")), box.kidOf(enc));
});

t.test("passwords: scrypt, salted, verified", async (t) => {
  const h = await hashPassword("correct horse");
  t.match(h, /^scrypt\$32768\$8\$1\$/);
  t.not(h, await hashPassword("correct horse"));
  t.ok(await verifyPassword("correct horse", h));
  t.notOk(await verifyPassword("wrong horse", h));
});

t.test("credentials and keys never reach the log, even at trace level", async (t) => {
  let logged = "";
  const sink = new Writable({
    write(chunk, _enc, done) {
      logged += chunk.toString();
      done();
    },
  });
  const { app, ctx } = await testApp(t, { env: { LOG_LEVEL: "trace", VIGIL_SECRET: OLD }, logTo: sink });
  const db = ctx.stores.db;
  const user = await createUser(db, { email: "log@x.example", plan: "enterprise" });
  const key = (await createKey(db, { user: user.id, permissions: [...PERMISSIONS] })).key;
  const created = await call(app, key, "POST", "/v1/connections", {
    service_type: "workflow_a",
    service_name: "x",
    base_url: "http://h",
    api_key: "plaintext-secret-9876",
  });
  t.equal(created.statusCode, 201);
  const bad = await call(app, key, "POST", "/v1/connections", {
    service_type: "workflow_a",
    service_name: "x",
    api_key: "plaintext-secret-5555",
  });
  t.equal(bad.statusCode, 400);
  t.ok(logged.includes("incoming request"), "requests were logged");
  t.notOk(logged.includes(key), "no API key in the log");
  t.notOk(logged.includes("plaintext-secret"), "no credential in the log");
});

t.test("vigil admin reencrypt moves credentials to the new secret", async (t) => {
  const db = await freshRelational(t, "pglite");
  const user = await createUser(db, { email: "r@x.example" });
  const oldBox = new CredentialBox({ current: OLD, previous: [] });
  await db.query(
    "INSERT INTO connections (id, user_id, service_type, service_name, base_url, api_key_enc, api_key_length) VALUES ('c1', $1, 'workflow_a', 'n', 'http://h', $2, 3)",
    [user.id, oldBox.encrypt("abc")],
  );
  const rotating = new CredentialBox({ current: NEW, previous: [OLD] });
  t.same(await reencryptCredentials(db, rotating), { reencrypted: 1, checked: 1 });
  t.same(await reencryptCredentials(db, rotating), { reencrypted: 0, checked: 1 }, "idempotent");
  const row = await db.query<{ api_key_enc: string }>("SELECT api_key_enc FROM connections WHERE id = 'c1'");
  t.equal(
    new CredentialBox({ current: NEW, previous: [] }).decrypt(row.rows[0]?.api_key_enc as string),
    "abc",
    "readable without the old secret",
  );
});
