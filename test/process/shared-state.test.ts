import pg from "pg";
import t from "tap";
import {
  freshDatabaseUrl,
  requireBackend,
  TEST_QUESTDB_PG_URL,
  TEST_QUESTDB_URL,
} from "../helpers/backends.js";
import { spawnVigil, twoApis } from "../helpers/process.js";
import { clearOfHourEnd } from "../helpers/hours.js";

/**
 * Two `vigil serve --roles api` processes on one PostgreSQL (and one QuestDB), as behind a load
 * balancer: what one process admits, stores or revokes, the other honours.
 */

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A minimal cookie-keeping form client for a real server's dashboard (over HTTP, not inject). */
class HttpForms {
  private readonly jar = new Map<string, string>();
  constructor(private readonly base: string) {}

  private take(r: Response) {
    for (const c of r.headers.getSetCookie()) {
      const [kv = ""] = c.split(";");
      const i = kv.indexOf("=");
      const value = kv.slice(i + 1);
      if (value === "" || /Max-Age=0/i.test(c)) this.jar.delete(kv.slice(0, i));
      else this.jar.set(kv.slice(0, i), value);
    }
    return r;
  }

  private get cookie() {
    return [...this.jar].map(([k, v]) => `${k}=${v}`).join("; ");
  }

  async get(path: string) {
    const r = this.take(
      await fetch(`${this.base}${path}`, {
        headers: { cookie: this.cookie, accept: "text/html" },
        redirect: "manual",
      }),
    );
    return { status: r.status, body: await r.text() };
  }

  /** Posts a form with the CSRF token of the first form on `csrfFrom`. */
  async post(path: string, form: Record<string, string>, csrfFrom: string) {
    const page = await this.get(csrfFrom);
    const csrf = /name="_csrf" value="([^"]+)"/.exec(page.body)?.[1];
    if (!csrf) throw new Error(`no form on ${csrfFrom}: ${page.status} ${page.body.slice(0, 300)}`);
    const r = this.take(
      await fetch(`${this.base}${path}`, {
        method: "POST",
        headers: {
          cookie: this.cookie,
          "content-type": "application/x-www-form-urlencoded",
          accept: "text/html",
        },
        body: new URLSearchParams({ _csrf: csrf, ...form }).toString(),
        redirect: "manual",
      }),
    );
    return { status: r.status, location: r.headers.get("location"), body: await r.text() };
  }
}

t.test("the hourly rate limit is one budget across two processes", async (t) => {
  if (!(await requireBackend(t, "postgres"))) return;
  const env = {
    DATABASE_URL: await freshDatabaseUrl(t),
    VIGIL_SECRET: "shared-state-secret-shared-state-secret",
    LOG_LEVEL: "warn",
  };
  const { a, b, admin } = await twoApis(t, env);
  const db = new pg.Client({ connectionString: env.DATABASE_URL });
  await db.connect();
  t.teardown(() => db.end());
  const account = async (email: string, limit: number) => {
    const user = await admin("create-user", "--email", email, "--plan", "free");
    await db.query("UPDATE users SET rate_limit_per_hour = $1 WHERE id = $2", [limit, user.id]);
    return (await admin("create-key", "--user", user.id as string)).key as string;
  };
  const call = async (url: string, key: string) => {
    const r = await fetch(`${url}/v1/connections`, { headers: { authorization: `Bearer ${key}` } });
    await r.body?.cancel();
    if (r.status !== 200 && r.status !== 429) throw new Error(`unexpected ${r.status}`);
    return r.status === 200;
  };

  await clearOfHourEnd(90_000); // both parts below spend budgets of one clock hour
  // 1. The whole budget spent through A: B, asked afterwards, refuses from its first request.
  const spent = await account("spent@x.example", 20);
  let admittedByA = 0;
  for (let i = 0; i < 20; i++) if (await call(a.url, spent)) admittedByA++;
  t.equal(admittedByA, 20, "A admits the budget");
  t.notOk(await call(a.url, spent), "A refuses the 21st");
  await sleep(2_500); // A adds its count to the shared row about once a second
  let admittedByB = 0;
  for (let i = 0; i < 5; i++) if (await call(b.url, spent)) admittedByB++;
  t.equal(admittedByB, 0, "B refuses every request: the budget was spent on A");

  // 2. Both processes at once, 20 requests/s in all for 6 s, against a budget of 40. A process
  // counts locally and adds its count to the shared row about once a second (src/ratelimit), so
  // the sum may pass the limit by what the other process admits between two of those syncs:
  // documented overshoot, here at most 2 s of the other process's requests (10 each per second).
  const LIMIT = 40;
  const OVERSHOOT = 2 * 10;
  const busy = await account("busy@x.example", LIMIT);
  const admitted = { a: 0, b: 0 };
  let sent = 0;
  const started = Date.now();
  await Promise.all(
    (["a", "b"] as const).map(async (which) => {
      const url = which === "a" ? a.url : b.url;
      // at most one request per 100 ms per process (no catching up after a slow answer)
      while (Date.now() - started < 6_000) {
        const at = Date.now();
        sent++;
        if (await call(url, busy)) admitted[which]++;
        await sleep(Math.max(0, 100 - (Date.now() - at)));
      }
    }),
  );
  const total = admitted.a + admitted.b;
  t.ok(sent > LIMIT + OVERSHOOT, `${sent} requests sent`);
  t.ok(admitted.a > 0 && admitted.b > 0, `both processes admitted some (A ${admitted.a}, B ${admitted.b})`);
  t.ok(total >= LIMIT, `the budget is usable: ${total} admitted of ${LIMIT}`);
  t.ok(
    total <= LIMIT + OVERSHOOT,
    `admitted in all ${total} <= limit ${LIMIT} + documented overshoot ${OVERSHOOT}`,
  );
  await sleep(2_500);
  let late = 0;
  for (let i = 0; i < 5; i++) {
    if (await call(a.url, busy)) late++;
    if (await call(b.url, busy)) late++;
  }
  t.equal(late, 0, "once both have synced, neither admits more");
});

t.test("a key revoked through one process is refused by the other within seconds", async (t) => {
  if (!(await requireBackend(t, "postgres"))) return;
  const env = {
    DATABASE_URL: await freshDatabaseUrl(t),
    VIGIL_SECRET: "shared-state-secret-shared-state-secret",
    LOG_LEVEL: "warn",
  };
  const { a, b, admin } = await twoApis(t, env);
  const user = await admin(
    "create-user",
    "--email",
    "revoker@x.example",
    "--plan",
    "pro",
    "--password",
    "correct horse battery staple",
  );
  const first = await admin("create-key", "--user", user.id as string, "--name", "first");
  const second = await admin("create-key", "--user", user.id as string, "--name", "second");
  const status = async (url: string, key: string) => {
    const r = await fetch(`${url}/v1/connections`, { headers: { authorization: `Bearer ${key}` } });
    await r.body?.cancel();
    return r.status;
  };
  // both processes have each key in their caches
  for (const k of [first.key, second.key] as string[]) {
    t.equal(await status(a.url, k), 200);
    t.equal(await status(b.url, k), 200);
  }
  const refusedWithin = async (url: string, key: string, ms: number) => {
    const from = Date.now();
    while (Date.now() - from < ms) {
      if ((await status(url, key)) === 401) return (Date.now() - from) / 1000;
      await sleep(100);
    }
    return null;
  };

  // through A's dashboard: A refuses at once, B within its key cache's 3 s (plus slack for load)
  const browser = new HttpForms(a.url);
  const signIn = await browser.post(
    "/signin",
    { email: "revoker@x.example", password: "correct horse battery staple", return_to: "/profile/keys" },
    "/signin",
  );
  t.equal(signIn.status, 303, "signed in on A");
  const revoked = await browser.post(`/profile/keys/${first.id}/revoke`, {}, "/profile/keys");
  t.equal(revoked.status, 303);
  t.match(revoked.location, /notice=revoked/);
  t.equal(await status(a.url, first.key as string), 401, "A refuses the key at once");
  const onB = await refusedWithin(b.url, first.key as string, 10_000);
  t.ok(onB !== null, `B refuses it ${onB?.toFixed(1)} s after the revocation (cache: 3 s)`);

  // through a third process (`vigil admin revoke-key`): both refuse within a few seconds
  t.equal(await status(a.url, second.key as string), 200);
  t.equal(await status(b.url, second.key as string), 200);
  const run = spawnVigil(t, ["admin", "revoke-key", "--id", second.id as string], env);
  t.equal((await run.exited(30_000)).code, 0, run.output());
  const [onA2, onB2] = await Promise.all([
    refusedWithin(a.url, second.key as string, 10_000),
    refusedWithin(b.url, second.key as string, 10_000),
  ]);
  t.ok(onA2 !== null && onB2 !== null, `A after ${onA2?.toFixed(1)} s, B after ${onB2?.toFixed(1)} s`);
});

t.test("a heartbeat resent to the other process is stored once", async (t) => {
  if (!(await requireBackend(t, "postgres"))) return;
  if (!(await requireBackend(t, "questdb"))) return;
  const env = {
    DATABASE_URL: await freshDatabaseUrl(t),
    QUESTDB_URL: TEST_QUESTDB_URL as string,
    QUESTDB_PG_URL: TEST_QUESTDB_PG_URL as string,
    VIGIL_SECRET: "shared-state-secret-shared-state-secret",
    LOG_LEVEL: "warn",
  };
  const { a, b, admin } = await twoApis(t, env);
  const user = await admin("create-user", "--email", "dedupe@x.example", "--plan", "enterprise");
  const { key } = await admin("create-key", "--user", user.id as string);
  const created = (await (
    await fetch(`${a.url}/v1/connections`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ service_type: "gateway", service_name: "gw" }),
    })
  ).json()) as { connection: { id: string }; ingest_api_key: string };
  const gateway = created.connection.id;
  const send = async (url: string, body: unknown) => {
    const r = await fetch(`${url}/v1/gateway/ingest`, {
      method: "POST",
      headers: { authorization: `Bearer ${created.ingest_api_key}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    t.equal(r.status, 201, `${url === a.url ? "A" : "B"} accepts`);
    return ((await r.json()) as { heartbeat_id: string }).heartbeat_id;
  };
  const from = Date.now() - 120_000;
  const withPeriod = {
    type: "heartbeat",
    gateway: { status: "healthy", latencyMs: 4, version: "1" },
    tokens: {
      period: {
        inputTokens: 100,
        outputTokens: 10,
        requestCount: 1,
        startedAt: new Date(from).toISOString(),
        endedAt: new Date(from + 10_000).toISOString(),
      },
    },
  };
  const healthOnly = { type: "heartbeat", gateway: { status: "healthy", latencyMs: 5, version: "1" } };

  const p1 = await send(a.url, withPeriod);
  t.equal(await send(b.url, withPeriod), p1, "B gives the resent period heartbeat A's id");
  const h1 = await send(b.url, healthOnly);
  t.equal(await send(a.url, healthOnly), h1, "A gives the resent health-only heartbeat B's id");
  t.not(p1, h1);

  // read back through the API, as a user would (QuestDB applies its WAL asynchronously: poll,
  // then look again a little later so a late duplicate would show)
  const totals = async (url: string) => {
    const r = await fetch(
      `${url}/v1/usage?connection_id=${gateway}&start_date=${new Date(from - 60_000).toISOString()}`,
      { method: "PUT", headers: { authorization: `Bearer ${key}` } },
    );
    return ((await r.json()) as { gateway: { heartbeats: number; input_tokens: number } | null }).gateway;
  };
  const deadline = Date.now() + 20_000;
  let seen = await totals(a.url);
  while ((seen?.heartbeats ?? 0) < 2 && Date.now() < deadline) {
    await sleep(250);
    seen = await totals(a.url);
  }
  await sleep(2_000);
  for (const [name, url] of [
    ["A", a.url],
    ["B", b.url],
  ] as const) {
    const g = await totals(url);
    t.equal(g?.heartbeats, 2, `${name}: two heartbeats, each sent twice, counted once`);
    t.equal(g?.input_tokens, 100, `${name}: the period's tokens counted once`);
  }
});
