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
