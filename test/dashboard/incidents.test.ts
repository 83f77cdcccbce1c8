import t from "tap";
import { insertAnomaly } from "../../src/anomalies/repository.js";
import { PERMISSIONS } from "../../src/core/actor.js";
import { addMember, createKey, createOrg, createUser } from "../../src/identity/accounts.js";
import { openIncident, resolveIncident } from "../../src/incidents/incidents.js";
import { testApp } from "../helpers/app.js";
import { FormClient as Browser } from "../helpers/dashboard.js";
import { call } from "../helpers/tenants.js";

/**
 * Incidents, anomalies and the alert history answered in-process (app.inject) on PGlite, with
 * incidents opened and resolved through the incidents domain itself: filters and the API's
 * messages for bad ones, the API's cursors (a forged one is a 400), another tenant's incident or
 * connection as a 404 with nothing changed, the acknowledgement (CSRF, an oversized note,
 * again, after resolution), who acknowledged in words, anomalies and the alert history. The
 * browser test (test/browser/incidents.test.ts) drives a real incident in Chromium.
 */

const PASSWORD = "incident password 1";

t.test("incidents, anomalies and alerts pages", async (t) => {
  const ta = await testApp(t);
  const { app, ctx } = ta;
  const db = ctx.stores.db;
  const alice = await createUser(db, { email: "alice@inc.example", plan: "enterprise", password: PASSWORD });
  const dave = await createUser(db, { email: "dave@inc.example", plan: "enterprise", password: PASSWORD });
  const bob = await createUser(db, { email: "bob@other.example", plan: "enterprise", password: PASSWORD });
  const org = await createOrg(db, { name: "Inc Org", owner: alice.id, plan: "enterprise" });
  await addMember(db, { org: org.id, user: dave.id, role: "member" });
  const all = [...PERMISSIONS];
  const aliceKey = (await createKey(db, { user: alice.id, permissions: all })).key;
  const bobKey = (await createKey(db, { user: bob.id, permissions: all })).key;
  const conn = async (key: string, body: Record<string, unknown>) => {
    const r = await call(app, key, "POST", "/v1/connections", body);
    if (r.statusCode !== 201) throw new Error(`${r.statusCode} ${r.body}`);
    return (r.json() as { connection: { id: string } }).connection.id;
  };
  const PA = await conn(aliceKey, {
    service_type: "workflow_a",
    service_name: "alice n8n",
    base_url: "http://127.0.0.1:1",
    api_key: "k-pa-1",
  });
  const OA = await conn(aliceKey, {
    service_type: "gateway",
    service_name: "org gateway",
    organization_id: org.id,
  });
  const PB = await conn(bobKey, {
    service_type: "workflow_a",
    service_name: "bob n8n",
    base_url: "http://127.0.0.1:2",
    api_key: "k-pb-1",
  });

  const target = (connectionId: string, name: string, userId: string, organizationId: string | null) => ({
    connectionId,
    connectionName: name,
    userId,
    organizationId,
  });
  const tPA = target(PA, "alice n8n", alice.id, null);
  const tOA = target(OA, "org gateway", alice.id, org.id);
  const tPB = target(PB, "bob n8n", bob.id, null);
  const T0 = Date.now() - 3 * 3600_000;
  const open = (tg: typeof tPA, kind: "availability" | "missed_heartbeat", at: number, title: string) =>
    db.transaction((tx) =>
      openIncident(tx, tg, {
        kind,
        title,
        detail:
          kind === "availability"
            ? { failures: 3, reason: "timeout", error: "connect ETIMEDOUT" }
            : { silentSeconds: 200 },
        at: new Date(at),
        publicUrl: "http://vigil.test",
      }),
    ) as Promise<string>;
  const resolve = (tg: typeof tPA, kind: "availability" | "missed_heartbeat", at: number) =>
    db.transaction((tx) =>
      resolveIncident(tx, tg, {
        kind,
        detail: { successes: 2 },
        reason: "2 consecutive successful checks",
        at: new Date(at),
        publicUrl: "http://vigil.test",
      }),
    );

  // 52 resolved incidents of alice's personal connection (more than a page), then open ones
  for (let i = 0; i < 52; i++) {
    await open(tPA, "availability", T0 + i * 60_000, `alice n8n is unavailable #${i}`);
    await resolve(tPA, "availability", T0 + i * 60_000 + 30_000 + i * 1000);
  }
  const paOpen = await open(tPA, "availability", T0 + 3600_000 * 2, "alice n8n is unavailable now");
  const oaOpen = await open(
    tOA,
    "missed_heartbeat",
    T0 + 3600_000 * 2 + 1000,
    "org gateway stopped sending heartbeats",
  );
  const pbOpen = await open(tPB, "availability", T0 + 3600_000 * 2 + 2000, "bob n8n is unavailable");

  const a = await Browser.signedIn(app, alice.email, PASSWORD);
  const b = await Browser.signedIn(app, bob.email, PASSWORD);
  const d = await Browser.signedIn(app, dave.email, PASSWORD);

  await t.test("the list: newest first, filters, the API's cursor", async (t) => {
    const first = await a.get("/incidents");
    t.equal(first.statusCode, 200);
    t.match(first.body, /<h1>Incidents<\/h1>/);
    const ids = [...first.body.matchAll(/data-incident="([^"]+)"/g)].map((m) => m[1]);
    t.equal(ids.length, 50, "one page of 50");
    t.equal(ids[0], oaOpen, "newest first");
    t.equal(ids[1], paOpen);
    t.notOk(ids.includes(pbOpen), "another tenant's incident is not listed");
    t.match(first.body, /<span class="badge open">open<\/span>/);
    t.match(first.body, new RegExp(`href="/connections/${PA}">alice n8n</a>`), "the connection, linked");
    t.match(first.body, /missed heartbeat/);
    const next = /href="(\/incidents\?cursor=[^"]+)" rel="next"/.exec(first.body)?.[1];
    t.ok(next, "a Next link carrying the cursor");
    const second = await a.get((next ?? "").replaceAll("&amp;", "&"));
    t.equal(second.statusCode, 200);
    const ids2 = [...second.body.matchAll(/data-incident="([^"]+)"/g)].map((m) => m[1]);
    t.equal(ids2.length, 4, "the rest: 54 in all");
    t.same(
      ids2.filter((x) => ids.includes(x)),
      [],
      "no row repeated",
    );
    t.notMatch(second.body, /rel="next"/, "no Next on the last page");
    t.match(second.body, /First page/);

    // the dashboard's cursor is the REST API's
    const cursor = decodeURIComponent(/cursor=([^"&]+)/.exec(next ?? "")?.[1] ?? "");
    const rest = await call(
      app,
      aliceKey,
      "GET",
      `/v1/incidents?limit=50&cursor=${encodeURIComponent(cursor)}`,
    );
    t.equal(rest.statusCode, 200);
    t.same(
      (rest.json() as { data: { id: string }[] }).data.map((r) => r.id),
      ids2,
      "GET /v1/incidents with the page's cursor answers the same rows",
    );

    const forged = await a.get(`/incidents?cursor=${encodeURIComponent(cursor.slice(0, -2) + "xx")}`);
    t.equal(forged.statusCode, 400, "a forged cursor: 400");
    t.match(forged.body, /cursor: signature does not match; start again without a cursor/);
    const foreign = await a.get(`/incidents?status=open&cursor=${encodeURIComponent(cursor)}`);
    t.equal(foreign.statusCode, 400, "a cursor of other filters: 400");
    t.match(foreign.body, /belongs to a different query/);

    const opened = await a.get("/incidents?status=open");
    const openIds = [...opened.body.matchAll(/data-incident="([^"]+)"/g)].map((m) => m[1]);
    t.same(openIds, [oaOpen, paOpen], "status=open: the two open ones");
    t.match(opened.body, /<option value="open" selected>/, "the filter is shown back");
    const kind = await a.get("/incidents?kind=missed_heartbeat");
    t.same(
      [...kind.body.matchAll(/data-incident="([^"]+)"/g)].map((m) => m[1]),
      [oaOpen],
    );
    const byConn = await a.get(`/incidents?connection_id=${OA}&status=`);
    t.same(
      [...byConn.body.matchAll(/data-incident="([^"]+)"/g)].map((m) => m[1]),
      [oaOpen],
    );
    const none = await a.get("/incidents?status=acknowledged");
    t.match(none.body, /No incident matches these filters/);

    const bad = await a.get("/incidents?status=bogus&kind=nope");
    t.equal(bad.statusCode, 400, "a bad filter: 400");
    t.match(bad.body, /must be one of open, acknowledged, resolved/);
    t.match(bad.body, /id="f-status" name="status" aria-invalid="true" aria-describedby="f-status-error"/);

    const strange = await a.get(`/incidents?connection_id=${PB}`);
    t.equal(strange.statusCode, 404, "another tenant's connection: 404");
    t.match(strange.body, new RegExp(`Connection ${PB} not found`));
    t.notMatch(strange.body, /No access/);
    const badConn = await a.get("/incidents?connection_id=not-a-uuid");
    t.equal(badConn.statusCode, 400);
    t.match(badConn.body, /must be a connection id \(a UUID\)/);
  });

  await t.test("an incident: timeline, acknowledgement and its refusals", async (t) => {
    const pageOf = await a.get(`/incidents/${paOpen}`);
    t.equal(pageOf.statusCode, 200);
    t.match(pageOf.body, /<h1>alice n8n is unavailable now<\/h1>/);
    t.match(pageOf.body, /3 consecutive failed checks; reason: timeout; error: connect ETIMEDOUT\./);
    t.match(pageOf.body, /A failure alert was decided for 1 e-mail recipient\./);
    t.match(pageOf.body, /<button type="submit">Acknowledge<\/button>/);

    const foreign = await a.get(`/incidents/${pbOpen}`);
    t.equal(foreign.statusCode, 404, "another tenant's incident: 404");
    t.match(foreign.body, new RegExp(`Incident ${pbOpen} not found`));
    t.equal((await a.get("/incidents/00000000-0000-4000-8000-000000000000")).statusCode, 404);
    const notId = await a.get("/incidents/nope");
    t.equal(notId.statusCode, 400);
    t.match(notId.body, /must be an incident id \(a UUID\)/);
    t.equal((await b.get(`/incidents/${pbOpen}`)).statusCode, 200, "its owner sees it");

    const statusOf = async (id: string, key = aliceKey) =>
      ((await call(app, key, "GET", `/v1/incidents/${id}`)).json() as { status: string }).status;

    const noCsrf = await a.post(`/incidents/${paOpen}/acknowledge`, { note: "x" });
    t.equal(noCsrf.statusCode, 403, "no CSRF token: 403");
    t.match(noCsrf.body, /nothing was changed/);
    t.equal(await statusOf(paOpen), "open");

    const long = await a.post(
      `/incidents/${paOpen}/acknowledge`,
      { note: "n".repeat(1001) },
      `/incidents/${paOpen}`,
    );
    t.equal(long.statusCode, 400, "an oversized note: 400");
    t.match(long.body, /must be at most 1000 characters/);
    t.match(long.body, /id="ack-note"[^>]*aria-invalid="true"/);
    t.equal(await statusOf(paOpen), "open", "nothing changed");

    const other = await a.post(`/incidents/${pbOpen}/acknowledge`, {}, `/incidents/${paOpen}`);
    t.equal(other.statusCode, 404, "acknowledging another tenant's incident: 404");
    t.equal(await statusOf(pbOpen, bobKey), "open", "nothing changed");

    const ok = await a.post(
      `/incidents/${paOpen}/acknowledge`,
      { note: "restarting <it>" },
      `/incidents/${paOpen}`,
    );
    t.equal(ok.statusCode, 303);
    t.equal(ok.headers.location, `/incidents/${paOpen}?notice=acknowledged`);
    const after = await a.get(String(ok.headers.location));
    t.match(after.body, /<span class="badge acknowledged" id="incident-status">acknowledged<\/span>/);
    t.match(after.body, /The incident is acknowledged/);
    t.match(after.body, /Acknowledged by alice@inc\.example\./);
    t.match(after.body, /restarting &lt;it&gt;/, "the note, escaped");
    t.notMatch(after.body, /<button type="submit">Acknowledge<\/button>/, "no button once acknowledged");
    const rest = (await call(app, aliceKey, "GET", `/v1/incidents/${paOpen}`)).json() as {
      status: string;
      events: { kind: string; detail: { by: Record<string, unknown>; note: string } }[];
    };
    t.equal(rest.status, "acknowledged", "the REST API agrees");
    const ack = rest.events.find((e) => e.kind === "acknowledged");
    t.same(ack?.detail.by, { type: "user", user_id: alice.id, via: "session" });
    t.equal(ack?.detail.note, "restarting <it>");

    const again = await a.post(`/incidents/${paOpen}/acknowledge`, {}, `/incidents/${paOpen}`);
    t.equal(again.statusCode, 303);
    t.match(String(again.headers.location), /notice=already/);
    t.match((await a.get(String(again.headers.location))).body, /already acknowledged; nothing changed/);

    // the org member sees who acknowledged the organization's incident, by e-mail
    t.equal((await a.post(`/incidents/${oaOpen}/acknowledge`, {}, `/incidents/${oaOpen}`)).statusCode, 303);
    const seen = await d.get(`/incidents/${oaOpen}`);
    t.equal(seen.statusCode, 200);
    t.match(seen.body, /Acknowledged by alice@inc\.example\./);
    t.match(seen.body, /no heartbeat for 3 min 20 s/);
    const list = await d.get("/incidents");
    t.match(list.body, /alice@inc\.example/);
    t.notMatch(list.body, /alice n8n/, "a member sees only the organization's connections");

    await resolve(tPA, "availability", Date.now());
    // a page opened before the resolution still posts its form
    const resolved = await a.post(`/incidents/${paOpen}/acknowledge`, {}, `/incidents/${paOpen}`);
    t.equal(resolved.statusCode, 409, "a resolved incident: 409");
    t.match(
      resolved.body,
      new RegExp(`Incident ${paOpen} is already resolved; only an open incident can be acknowledged`),
    );
    t.equal(await statusOf(paOpen), "resolved");
    t.match(resolved.body, /Resolved automatically: 2 consecutive successful checks\./);
  });

  await t.test("anomalies: empty, one, filters", async (t) => {
    const empty = await a.get("/anomalies");
    t.equal(empty.statusCode, 200);
    t.match(empty.body, /No anomalies detected/);
    const hour = Math.floor(Date.now() / 3600_000) * 3600_000 - 3600_000;
    await insertAnomaly(db, {
      connectionId: PA,
      metric: "response_time",
      detectedAt: new Date(hour + 3600_000 + 120_000),
      startedAt: new Date(hour - 3600_000),
      windowStart: new Date(hour),
      windowEnd: new Date(hour + 3600_000),
      observed: 950,
      baselineMean: 210,
      baselineStddev: 20,
      baselineMedian: 200,
      baselineMad: 15,
      bandLow: 120,
      bandHigh: 280,
      score: 33.7,
    });
    await insertAnomaly(db, {
      connectionId: PB,
      metric: "failure_rate",
      detectedAt: new Date(hour + 3600_000),
      startedAt: new Date(hour),
      windowStart: new Date(hour),
      windowEnd: new Date(hour + 3600_000),
      observed: 0.5,
      baselineMean: 0,
      baselineStddev: 0,
      baselineMedian: 0,
      baselineMad: 0,
      bandLow: 0,
      bandHigh: 0.17,
      score: 10,
    });
    const one = await a.get("/anomalies");
    t.equal([...one.body.matchAll(/data-anomaly=/g)].length, 1, "only the user's");
    t.match(one.body, /response time \(p95\)/);
    t.match(one.body, /<strong>950 ms<\/strong>/);
    t.match(one.body, /200 ms<br><span class="muted">band 120 ms – 280 ms<\/span>/);
    t.match(one.body, />33\.7</);
    t.match(one.body, /ongoing/);
    t.match((await a.get("/anomalies?status=resolved")).body, /No anomaly matches these filters/);
    const bad = await a.get("/anomalies?status=closed");
    t.equal(bad.statusCode, 400);
    t.match(bad.body, /must be open or resolved/);
    t.equal((await a.get(`/anomalies?connection_id=${PB}`)).statusCode, 404);
  });

  await t.test("the alert history", async (t) => {
    const all = await a.get("/alerts");
    t.equal(all.statusCode, 200);
    t.match(all.body, /<h1>Alert history<\/h1>/);
    t.match(all.body, /data-kind="failure"/);
    t.match(all.body, /data-kind="recovery"/);
    t.match(all.body, /audit: API key created/);
    t.match(all.body, /alice@inc\.example/);
    t.match(all.body, /<span class="badge pending">pending<\/span>/);
    t.notMatch(all.body, /bob@other\.example/, "another tenant's alerts are not listed");
    const audits = await a.get("/alerts?kind=audit");
    t.notMatch(audits.body, /data-kind="failure"/);
    t.match(audits.body, /data-kind="audit"/);
    const byConn = await a.get(`/alerts?connection_id=${PA}`);
    t.notMatch(byConn.body, /data-kind="audit"/, "audits belong to the account");
    t.match(byConn.body, /data-kind="failure"/);
    t.ok(/rel="next"/.test(all.body), "more than a page of alerts: a Next link");
    const bad = await a.get("/alerts?kind=page");
    t.equal(bad.statusCode, 400);
    t.match(bad.body, /must be one of failure, recovery, audit, budget_warning, anomaly/);
    t.equal((await a.get(`/alerts?connection_id=${PB}`)).statusCode, 404);

    // From and To: whole UTC days, both included (the API's since and until)
    const today = new Date().toISOString().slice(0, 10);
    const yesterday = new Date(Date.now() - 86_400_000).toISOString().slice(0, 10);
    const days = await a.get(`/alerts?from=${yesterday}&to=${today}`);
    t.equal(days.statusCode, 200);
    t.match(days.body, /data-kind="audit"/, "the audits of today");
    t.match(days.body, new RegExp(`id="f-from" name="from" value="${yesterday}"`));
    const next = /href="([^"]+)" rel="next"/.exec(days.body)?.[1]?.replaceAll("&amp;", "&");
    t.match(next, new RegExp(`from=${yesterday}&to=${today}&cursor=`), "Next keeps the days");
    t.equal((await a.get(next ?? "")).statusCode, 200, "and its cursor matches them");
    const before = await a.get(`/alerts?to=${yesterday}&kind=audit`);
    t.match(before.body, /No alert matches these filters/, "nothing before today");
    const badDay = await a.get("/alerts?from=yesterday");
    t.equal(badDay.statusCode, 400);
    t.match(badDay.body, /must be a date \(YYYY-MM-DD\)/);
    t.match(
      badDay.body,
      /id="f-from" name="from" value="yesterday" aria-describedby="f-from-hint f-from-error" aria-invalid="true"/,
    );
    const reversed = await a.get(`/alerts?from=${today}&to=${yesterday}`);
    t.equal(reversed.statusCode, 400);
    t.match(reversed.body, /must not be after To/);
  });
});
