import t from "tap";
import { PERMISSIONS } from "../../src/core/actor.js";
import { createKey, createUser } from "../../src/identity/accounts.js";
import { openIncident } from "../../src/incidents/incidents.js";
import type { Resolver } from "../../src/lib/outbound.js";
import { deliverWebhooks } from "../../src/webhooks/delivery.js";
import { createWebhookAgent, postWebhook } from "../../src/webhooks/send.js";
import { testApp } from "../helpers/app.js";
import { call } from "../helpers/tenants.js";
import { receiver } from "../webhooks/fixtures/receiver.js";
import { endless, silent, target } from "./fixtures/servers.js";

/**
 * Outbound safety of webhook deliveries (issue #16, point 4): never to link-local or cloud
 * metadata addresses; with PROBE_DENY_PRIVATE=true to no other non-public address either, except
 * loopback while WEBHOOK_ALLOW_HTTP_LOOPBACK=true; judged when connecting, against every DNS answer.
 */

const post = (agent: ReturnType<typeof createWebhookAgent>, url: string, timeoutMs?: number) =>
  postWebhook(agent, new URL(url), "{}", { "content-type": "application/json" }, timeoutMs);

const zone =
  (answers: Record<string, string[]>): Resolver =>
  (host, _opts, cb) => {
    const list = answers[host];
    if (!list)
      return cb(Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: "ENOTFOUND" }), []);
    cb(
      null,
      list.map((address) => ({ address, family: address.includes(":") ? 6 : 4 })),
    );
  };

t.test("link-local and metadata addresses: refused whatever the settings", async (t) => {
  const resolve = zone({ "hooks.customer.test": ["169.254.169.254"], "ll.customer.test": ["fe80::1"] });
  for (const [denyPrivate, allowHttpLoopback] of [
    [false, false],
    [false, true],
    [true, true],
  ]) {
    const agent = createWebhookAgent({ denyPrivate, allowHttpLoopback, resolve });
    t.teardown(() => agent.close());
    const started = Date.now();
    t.equal(
      await post(agent, "https://169.254.169.254/latest/meta-data/"),
      "refused: 169.254.169.254 is a cloud metadata address (webhooks are never sent to link-local or cloud metadata addresses)",
    );
    t.match(await post(agent, "http://[fe80::1]:9/hook"), /^refused: fe80::1 is a link-local address/);
    t.match(await post(agent, "https://[::ffff:169.254.1.1]/"), /a link-local address/, "IPv4-mapped");
    const named = await post(agent, "https://hooks.customer.test/path-secret-token");
    t.match(
      named,
      /^refused: hooks\.customer\.test resolves to 169\.254\.169\.254, a cloud metadata address/,
    );
    t.notMatch(named, /path-secret-token/, "the URL's path is never in the error");
    t.match(await post(agent, "https://ll.customer.test/"), /ll\.customer\.test resolves to fe80::1/);
    t.ok(Date.now() - started < 5_000, "refused at once, before connecting");
  }
});

t.test(
  "a loopback receiver: allowed by default; PROBE_DENY_PRIVATE refuses it unless WEBHOOK_ALLOW_HTTP_LOOPBACK",
  async (t) => {
    const rx = await receiver(t);
    const agents = {
      byDefault: createWebhookAgent(),
      denying: createWebhookAgent({ denyPrivate: true }),
      denyingButLoopback: createWebhookAgent({ denyPrivate: true, allowHttpLoopback: true }),
      privateName: createWebhookAgent({
        denyPrivate: true,
        allowHttpLoopback: true,
        resolve: zone({ "hooks.lan.test": ["10.1.2.3"] }),
      }),
    };
    for (const a of Object.values(agents)) t.teardown(() => a.close());

    t.equal(await post(agents.byDefault, `${rx.url}/a`), null, "delivered by default");
    t.equal(
      await post(agents.denying, `${rx.url}/b`),
      "refused: 127.0.0.1 is a loopback address (PROBE_DENY_PRIVATE=true)",
    );
    t.equal(rx.received.length, 1, "the refused delivery never reached the receiver");
    t.equal(await post(agents.denyingButLoopback, `${rx.url}/c`), null, "loopback stays allowed");
    t.equal(
      await post(agents.privateName, "https://hooks.lan.test/x"),
      "refused: hooks.lan.test resolves to 10.1.2.3, a private address (PROBE_DENY_PRIVATE=true)",
    );
    t.same(
      rx.received.map((r) => r.path),
      ["/a", "/c"],
    );
  },
);

t.test("a receiver's answer is bounded in size and time; redirects are not followed", async (t) => {
  const agent = createWebhookAgent();
  t.teardown(() => agent.close());
  const big = await target(t, (_req, res) => endless(res, Buffer.alloc(64 * 1024, "x")));
  let started = Date.now();
  t.equal(await post(agent, big.url, 5_000), null, "a 2xx with an endless body is accepted");
  t.ok(Date.now() - started < 2_000, "its body is read a few KB at most");

  const elsewhere = await target(t, (_req, res) => res.end("ok"));
  const moving = await target(t, (_req, res) => {
    res.writeHead(307, { location: elsewhere.url });
    res.end();
  });
  t.equal(await post(agent, moving.url), "HTTP 307 (redirects are not followed)");
  t.equal(elsewhere.state.hits, 0);

  const hang = await silent(t);
  started = Date.now();
  t.equal(await post(agent, hang.url, 300), "timed out after 0.3 s");
  t.ok(Date.now() - started < 1_500, "a receiver that never answers times out");
});

t.test("through the API and the delivery job, with PROBE_DENY_PRIVATE=true", async (t) => {
  const ta = await testApp(t, { env: { PROBE_DENY_PRIVATE: "true", WEBHOOK_ALLOW_HTTP_LOOPBACK: "true" } });
  const db = ta.ctx.stores.db;
  const user = await createUser(db, { email: "hooks@x.example", plan: "enterprise" });
  const key = (await createKey(db, { user: user.id, permissions: [...PERMISSIONS] })).key;
  const rx = await receiver(t);

  for (const [url, message] of [
    ["https://10.0.0.5/hook", "body.url: refused: 10.0.0.5 is a private address (PROBE_DENY_PRIVATE=true)"],
    [
      "https://169.254.169.254/hook",
      "body.url: refused: 169.254.169.254 is a cloud metadata address (webhooks are never sent to link-local or cloud metadata addresses)",
    ],
    ["https://[fd00::1]/hook", "body.url: refused: fd00::1 is a private address (PROBE_DENY_PRIVATE=true)"],
  ] as const) {
    const r = await call(ta.app, key, "POST", "/v1/webhooks", { url });
    t.equal(r.statusCode, 400, url);
    t.match(r.json(), { success: false, error: { code: "VALIDATION_ERROR", message } }, url);
  }
  const hook = await call(ta.app, key, "POST", "/v1/webhooks", { url: `${rx.url}/hooks/x` });
  t.equal(hook.statusCode, 201, "a loopback receiver with WEBHOOK_ALLOW_HTTP_LOOPBACK=true");

  const gw = await call(ta.app, key, "POST", "/v1/connections", {
    service_type: "gateway",
    service_name: "gw",
  });
  await db.transaction((tx) =>
    openIncident(
      tx,
      {
        connectionId: gw.json().connection.id as string,
        connectionName: "gw",
        userId: user.id,
        organizationId: null,
      },
      {
        kind: "availability",
        title: "down",
        detail: {},
        at: new Date(),
        publicUrl: "https://vigil.example.com",
      },
    ),
  );
  t.equal(await deliverWebhooks(ta.ctx), 1, "delivered through the app's outbound agent");
  t.equal(rx.received.length, 1);
});
