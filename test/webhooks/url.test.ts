import t from "tap";
import { ServiceError } from "../../src/core/errors.js";
import { checkWebhookUrl, isLoopbackHost, urlHint } from "../../src/webhooks/url.js";

/** The webhook URL rules on their own (the API test sends the same through POST /v1/webhooks). */

t.test("loopback hosts", async (t) => {
  for (const host of [
    "localhost",
    "LOCALHOST",
    "api.localhost",
    "127.0.0.1",
    "127.255.0.9",
    "[::1]",
    "[::ffff:7f00:1]",
  ])
    t.ok(isLoopbackHost(host), `${host} is loopback`);
  for (const host of [
    "10.0.0.1",
    "128.0.0.1",
    "localhost.example.com",
    "[::2]",
    "0.0.0.0",
    "example.com",
    "[::ffff:a00:1]",
  ])
    t.notOk(isLoopbackHost(host), `${host} is not`);
  t.ok(isLoopbackHost(new URL("http://127.1/").hostname), "127.1, as the URL parser writes it");
  t.ok(isLoopbackHost(new URL("http://2130706433/").hostname), "and 2130706433");
  t.ok(isLoopbackHost(new URL("http://[::ffff:127.0.0.1]/").hostname), "and IPv4-mapped 127.0.0.1");
});

t.test("a URL's hint shows its origin and last characters only", async (t) => {
  t.equal(
    urlHint(new URL("https://hooks.slack.com/services/T0/B0/XXXXsecretZZZZ")),
    "https://hooks.slack.com/…ZZZZ",
  );
  t.equal(urlHint(new URL("https://hooks.example.com")), "https://hooks.example.com/");
  t.equal(
    urlHint(new URL("https://hooks.example.com/ab")),
    "https://hooks.example.com/…",
    "too short to show a part",
  );
});

t.test("the rules", async (t) => {
  const rules = { allowHttpLoopback: false, publicUrl: "https://vigil.example.com", port: 8080 };
  const refused = (url: string, r = rules) => {
    try {
      checkWebhookUrl(url, r);
      return null;
    } catch (err) {
      t.ok(err instanceof ServiceError && err.code === "invalid_input" && err.field === "body.url", url);
      return (err as Error).message;
    }
  };
  t.equal(
    checkWebhookUrl(" https://Hooks.Example.com/a b ".trim(), rules).href,
    "https://hooks.example.com/a%20b",
    "normalized",
  );
  t.match(refused("http://127.0.0.1:9000/"), /WEBHOOK_ALLOW_HTTP_LOOPBACK/);
  t.equal(refused("http://127.0.0.1:9000/", { ...rules, allowHttpLoopback: true }), null);
  t.match(refused("http://127.0.0.1:8080/", { ...rules, allowHttpLoopback: true }), /itself/);
  t.match(refused("https://vigil.example.com/elsewhere"), /itself/);
  t.equal(
    refused("https://vigil.example.com:8443/"),
    null,
    "another port of the same host is another origin",
  );
  t.equal(refused("https://127.0.0.1:8443/"), null, "https to loopback on another port");
  t.match(refused("https://[::]:8080/"), /itself/);
  t.match(refused("file:///etc/passwd"), /file is not supported/);
  t.match(refused("data:text/plain,hi"), /data is not supported/);
  t.match(refused("https://:pw@hooks.example.com/"), /user name or password/);
});

t.test("outbound safety on the host as written (src/lib/outbound.ts)", async (t) => {
  const rules = { allowHttpLoopback: false, publicUrl: "https://vigil.example.com", port: 8080 };
  const message = (url: string, r: Parameters<typeof checkWebhookUrl>[1] = rules) => {
    try {
      checkWebhookUrl(url, r);
      return null;
    } catch (err) {
      t.ok(err instanceof ServiceError && err.field === "body.url", url);
      return (err as Error).message;
    }
  };
  const never = /\(webhooks are never sent to link-local or cloud metadata addresses\)$/;
  for (const r of [rules, { ...rules, denyPrivate: true }, { ...rules, allowHttpLoopback: true }]) {
    t.match(message("https://169.254.169.254/latest/meta-data/", r), never);
    t.match(message("https://[fe80::1]/", r), never);
    t.match(message("https://[::ffff:169.254.169.254]/", r), never);
    t.match(message("https://[fd00:ec2::254]/", r), never, "AWS metadata over IPv6");
  }
  // by default, private addresses written as IPs pass (a receiver on the operator's network)
  t.equal(message("https://10.0.0.5/hook"), null);
  t.equal(message("https://[fd00::1]/hook"), null);
  t.equal(message("https://127.0.0.1:8443/"), null);
  const deny = { ...rules, denyPrivate: true };
  t.equal(
    message("https://10.0.0.5/hook", deny),
    "body.url: refused: 10.0.0.5 is a private address (PROBE_DENY_PRIVATE=true)",
  );
  t.match(message("https://100.64.1.1/", deny), /carrier-grade NAT/);
  t.match(message("https://0.0.0.0:9000/", deny), /unspecified/);
  t.match(message("https://127.0.0.1:8443/", deny), /127\.0\.0\.1 is a loopback address/);
  t.match(message("https://localhost:8443/", deny), /localhost resolves to 127\.0\.0\.1, a loopback address/);
  t.equal(message("https://hooks.example.com/x", deny), null, "a name is judged when a delivery connects");
  const denyButLoopback = { ...deny, allowHttpLoopback: true };
  t.equal(
    message("http://127.0.0.1:9000/", denyButLoopback),
    null,
    "WEBHOOK_ALLOW_HTTP_LOOPBACK keeps loopback",
  );
  t.equal(message("https://localhost:9000/", denyButLoopback), null);
  t.match(message("https://192.168.0.2/", denyButLoopback), /private address/);
});
