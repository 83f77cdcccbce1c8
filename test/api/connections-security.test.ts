import t from "tap";
import { testApp } from "../helpers/app.js";
import { call, seedTenants } from "../helpers/tenants.js";

/**
 * The security matrix: every Connections endpoint x every kind of key x every owner of a
 * connection, with the exact status expected, and two invariants over every response:
 * no plaintext credential, and no connection the key may not see.
 */
t.test("connections security matrix", async (t) => {
  const ta = await testApp(t);
  const { app } = ta;
  const w = await seedTenants(ta);
  const { PA, OA, OB, PB, PC } = w.conns;
  const allConns = [PA, OA, OB, PB, PC];

  type KeyName = keyof typeof w.keys;
  // What each key may see; ingest and revoked keys see nothing through this API.
  const visible: Record<KeyName, string[]> = {
    alicePersonal: [PA, OA],
    aliceOrgA: [OA],
    aliceReadOnly: [PA, OA],
    bobPersonal: [OB, PB],
    bobOrgB: [OB],
    davePersonal: [OA],
    carolPersonal: [PC],
    ingest: [],
    revoked: [],
  };
  const canWrite = (k: KeyName) => k !== "aliceReadOnly" && k !== "ingest" && k !== "revoked";
  const responses: { key: KeyName; body: string }[] = [];
  const record = <R extends { body: string }>(key: KeyName, r: R): R => {
    responses.push({ key, body: r.body });
    return r;
  };

  for (const key of Object.keys(w.keys) as KeyName[]) {
    const k = w.keys[key];
    // list
    const list = record(key, await call(app, k, "GET", "/v1/connections"));
    if (key === "revoked") t.equal(list.statusCode, 401, `${key} list`);
    else if (key === "ingest") t.equal(list.statusCode, 403, `${key} list`);
    else {
      t.equal(list.statusCode, 200, `${key} list`);
      t.same(
        list
          .json()
          .connections.map((c: { id: string }) => c.id)
          .sort(),
        [...visible[key]].sort(),
        `${key} lists exactly what it may see`,
      );
    }

    for (const id of allConns) {
      const sees = visible[key].includes(id);
      const expectRead = key === "revoked" ? 401 : sees ? 200 : 403;
      const get = record(key, await call(app, k, "GET", `/v1/connections/${id}`));
      t.equal(
        get.statusCode,
        expectRead,
        `${key} GET ${id === PA ? "PA" : id === OA ? "OA" : id === OB ? "OB" : id === PB ? "PB" : "PC"}`,
      );
      if (get.statusCode === 403) t.same(Object.keys(get.json()), ["error"], "403 body is {error}");

      const expectWrite = key === "revoked" ? 401 : sees && canWrite(key) ? 200 : 403;
      const put = record(
        key,
        await call(app, k, "PUT", `/v1/connections/${id}`, { service_name: `renamed by ${key}` }),
      );
      t.equal(put.statusCode, expectWrite, `${key} PUT`);

      // DELETE is checked only where it must be refused; allowed deletes are tested below.
      if (!(sees && canWrite(key))) {
        const del = record(key, await call(app, k, "DELETE", `/v1/connections/${id}`));
        t.equal(del.statusCode, key === "revoked" ? 401 : 403, `${key} DELETE refused`);
      }
    }

    const absent = record(
      key,
      await call(app, k, "GET", "/v1/connections/00000000-0000-4000-8000-000000000000"),
    );
    t.equal(absent.statusCode, key === "revoked" ? 401 : key === "ingest" ? 403 : 404, `${key} GET absent`);
    if (absent.statusCode === 404) t.same(absent.json(), { error: "Connection not found" });
  }

  // creating in organization A
  const createIn = (org: string | undefined) => ({
    service_type: "gateway",
    service_name: "new",
    ...(org === undefined ? {} : { organization_id: org }),
  });
  const orgA = w.orgs.orgA.id;
  const createCases: [KeyName, string | undefined, number][] = [
    ["alicePersonal", orgA, 201], // owner
    ["davePersonal", orgA, 201], // plain member
    ["aliceOrgA", orgA, 201], // its own organization
    ["aliceOrgA", undefined, 201], // omitted: the key's organization
    ["aliceOrgA", "personal", 403], // organization keys never make personal connections
    ["bobOrgB", orgA, 403], // another organization's key
    ["bobPersonal", orgA, 403], // not a member
    ["carolPersonal", orgA, 403], // not a member of any organization
    ["aliceReadOnly", orgA, 403], // lacks connections:write
    ["ingest", orgA, 403],
    ["revoked", orgA, 401],
  ];
  for (const [key, org, status] of createCases) {
    const r = record(key, await call(app, w.keys[key], "POST", "/v1/connections", createIn(org)));
    t.equal(r.statusCode, status, `${key} creates in ${org ?? "(omitted)"}`);
    if (status === 201 && key === "aliceOrgA" && org === undefined)
      t.equal(
        (await call(app, w.keys.alicePersonal, "GET", `/v1/connections/${r.json().connection.id}`)).json()
          .organization_id,
        orgA,
      );
  }
  const missing = await call(app, null, "GET", "/v1/connections");
  t.equal(missing.statusCode, 401);
  t.same(missing.json().error.code, "INVALID_API_KEY");

  // a plain member may add an organization's connections but not delete them (docs/api.md: Connections API, Roles)
  {
    const made = await call(app, w.keys.davePersonal, "POST", "/v1/connections", createIn(orgA));
    const id = made.json().connection.id;
    const del = record(
      "davePersonal",
      await call(app, w.keys.davePersonal, "DELETE", `/v1/connections/${id}`),
    );
    t.equal(del.statusCode, 403, "a member cannot delete an organization's connection, even one they made");
    t.match(del.json(), { error: /admin or owner role/ });
    t.equal((await call(app, w.keys.alicePersonal, "GET", `/v1/connections/${id}`)).statusCode, 200, "kept");
  }

  // allowed deletes (owner's keys), each on a throwaway connection
  for (const key of ["alicePersonal", "aliceOrgA"] as KeyName[]) {
    const made = await call(app, w.keys.alicePersonal, "POST", "/v1/connections", createIn(orgA));
    const id = made.json().connection.id;
    const del = record(key, await call(app, w.keys[key], "DELETE", `/v1/connections/${id}`));
    t.equal(del.statusCode, 200, `${key} deletes an organization A connection`);
    t.same(del.json(), { message: "Connection deleted" });
    t.equal((await call(app, w.keys.alicePersonal, "GET", `/v1/connections/${id}`)).statusCode, 404, "gone");
  }

  for (const { key, body } of responses) {
    for (const s of w.secrets) t.notOk(body.includes(s), `no plaintext credential in a response to ${key}`);
    for (const id of allConns) {
      if (!visible[key].includes(id) && body.includes(id))
        t.fail(`${key} was shown connection ${id}: ${body}`);
    }
  }
});
