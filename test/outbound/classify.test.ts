import t from "tap";
import {
  type AddressKind,
  checkTarget,
  classifyAddress,
  embeddedIpv4,
  probePolicy,
  refusal,
  type Resolver,
  webhookPolicy,
} from "../../src/lib/outbound.js";

/** The outbound policy's classifier (src/lib/outbound.ts) over a table of addresses. */

const TABLE: [string, AddressKind | null][] = [
  // public
  ["8.8.8.8", "public"],
  ["1.1.1.1", "public"],
  ["93.184.216.34", "public"],
  ["100.63.255.255", "public"], // just below CGNAT
  ["100.128.0.0", "public"], // just above
  ["172.15.255.255", "public"],
  ["172.32.0.0", "public"],
  ["192.167.255.255", "public"],
  ["169.253.255.255", "public"],
  ["223.255.255.255", "public"],
  ["2606:4700:4700::1111", "public"],
  ["2a00:1450:4001:81b::200e", "public"],
  ["::ffff:8.8.8.8", "public"], // IPv4-mapped public
  ["64:ff9b::808:808", "public"], // NAT64 of 8.8.8.8 (DNS64 networks)
  ["2002:808:808::1", "public"], // 6to4 of 8.8.8.8
  // unspecified / this network
  ["0.0.0.0", "unspecified"],
  ["0.1.2.3", "unspecified"],
  ["::", "unspecified"],
  ["0:0:0:0:0:0:0:0", "unspecified"],
  // loopback
  ["127.0.0.1", "loopback"],
  ["127.255.255.254", "loopback"],
  ["::1", "loopback"],
  ["[::1]", "loopback"],
  ["::ffff:127.0.0.1", "loopback"],
  ["::ffff:7f00:1", "loopback"],
  ["::ffff:0:127.0.0.1", "loopback"], // SIIT
  ["64:ff9b::7f00:1", "loopback"], // NAT64 of 127.0.0.1
  ["2002:7f00:1::", "loopback"], // 6to4 of 127.0.0.1
  // private
  ["10.0.0.5", "private"],
  ["10.255.255.255", "private"],
  ["172.16.0.1", "private"],
  ["172.31.255.255", "private"],
  ["192.168.1.1", "private"],
  ["::ffff:10.0.0.5", "private"],
  ["::ffff:a00:5", "private"],
  ["fc00::1", "private"],
  ["fd12:3456:789a::1", "private"],
  ["FD00::1", "private"],
  // carrier-grade NAT
  ["100.64.0.1", "shared"],
  ["100.127.255.255", "shared"],
  // link-local and metadata
  ["169.254.0.1", "link_local"],
  ["169.254.170.2", "link_local"],
  ["fe80::1", "link_local"],
  ["fe80::1%eth0", "link_local"],
  ["febf::1", "link_local"],
  ["169.254.169.254", "metadata"],
  ["::ffff:169.254.169.254", "metadata"],
  ["::ffff:a9fe:a9fe", "metadata"],
  ["fd00:ec2::254", "metadata"],
  ["100.100.100.200", "metadata"],
  // multicast
  ["224.0.0.1", "multicast"],
  ["239.255.255.250", "multicast"],
  ["ff02::1", "multicast"],
  // reserved
  ["240.0.0.1", "reserved"],
  ["255.255.255.255", "reserved"],
  ["192.0.0.8", "reserved"],
  ["192.0.2.1", "reserved"],
  ["198.18.0.1", "reserved"],
  ["198.51.100.7", "reserved"],
  ["203.0.113.9", "reserved"],
  ["2001:db8::1", "reserved"],
  ["2001:0:4136:e378::1", "reserved"], // Teredo
  ["100::1", "reserved"],
  ["::10.0.0.1", "reserved"], // IPv4-compatible (deprecated)
  ["4000::1", "reserved"], // outside global unicast
  // not addresses
  ["example.com", null],
  ["localhost", null],
  ["10.0.0", null],
  ["1::2::3", null],
  ["", null],
];

t.test("every address of the table is classified", async (t) => {
  for (const [ip, kind] of TABLE) t.equal(classifyAddress(ip), kind, `${ip} -> ${kind}`);
});

t.test("the IPv4 address an IPv6 one carries", async (t) => {
  t.equal(embeddedIpv4("::ffff:10.1.2.3"), "10.1.2.3");
  t.equal(embeddedIpv4("::ffff:a01:203"), "10.1.2.3");
  t.equal(embeddedIpv4("64:ff9b::a01:203"), "10.1.2.3");
  t.equal(embeddedIpv4("2002:a01:203:1::5"), "10.1.2.3");
  t.equal(embeddedIpv4("2001:db8::1"), null);
  t.equal(embeddedIpv4("::1"), null);
  t.equal(embeddedIpv4("not an address"), null);
});

t.test("probes: everything by default; every non-public kind with PROBE_DENY_PRIVATE", async (t) => {
  for (const [ip, kind] of TABLE) {
    if (kind === null) continue;
    t.equal(refusal(ip, probePolicy(false)), null, `${ip} allowed by default`);
    const why = refusal(ip, probePolicy(true));
    if (kind === "public") t.equal(why, null, `${ip} allowed when denying`);
    else t.match(why, /^refused: .+ \(PROBE_DENY_PRIVATE=true\)$/, `${ip} refused when denying`);
  }
  t.equal(
    refusal("10.0.0.5", probePolicy(true)),
    "refused: 10.0.0.5 is a private address (PROBE_DENY_PRIVATE=true)",
  );
  t.equal(
    refusal("127.0.0.1", probePolicy(true), "localhost"),
    "refused: localhost resolves to 127.0.0.1, a loopback address (PROBE_DENY_PRIVATE=true)",
  );
  t.equal(
    refusal("169.254.169.254", probePolicy(true)),
    "refused: 169.254.169.254 is a cloud metadata address (PROBE_DENY_PRIVATE=true)",
  );
  t.equal(refusal("127.0.0.1", { ...probePolicy(true), exempt: ["127.0.0.0/30"] }), null, "an exempt range");
  t.match(refusal("127.0.0.9", { ...probePolicy(true), exempt: ["127.0.0.0/30"] }), /loopback/);
});

t.test("webhooks: never link-local or metadata; the rest with PROBE_DENY_PRIVATE", async (t) => {
  const always = /^refused: .+ \(webhooks are never sent to link-local or cloud metadata addresses\)$/;
  for (const [ip, kind] of TABLE) {
    if (kind === null) continue;
    const open = refusal(ip, webhookPolicy(false, false));
    const closed = refusal(ip, webhookPolicy(true, false));
    const closedButLoopback = refusal(ip, webhookPolicy(true, true));
    if (kind === "link_local" || kind === "metadata") {
      t.match(open, always, `${ip} refused whatever the setting`);
      t.match(closed, always);
      t.match(closedButLoopback, always);
    } else if (kind === "public") {
      t.equal(open ?? closed ?? closedButLoopback, null, `${ip} allowed`);
    } else {
      t.equal(open, null, `${ip} allowed by default`);
      t.match(closed, /PROBE_DENY_PRIVATE=true/, `${ip} refused when denying`);
      if (kind === "loopback")
        t.equal(closedButLoopback, null, `${ip}: WEBHOOK_ALLOW_HTTP_LOOPBACK keeps loopback allowed`);
      else t.match(closedButLoopback, /PROBE_DENY_PRIVATE=true/);
    }
  }
  t.equal(
    refusal("169.254.169.254", webhookPolicy(false, true)),
    "refused: 169.254.169.254 is a cloud metadata address (webhooks are never sent to link-local or cloud metadata addresses)",
  );
});

t.test(
  "a target checked before it is stored: literal IPs as they are, names by their DNS answers",
  async (t) => {
    const zone: Record<string, string[]> = {
      "public.test": ["93.184.216.34"],
      "internal.test": ["10.0.0.5"],
      "mixed.test": ["93.184.216.34", "192.168.0.10"],
      "v6.test": ["fd00::5"],
    };
    const resolve: Resolver = (host, _opts, cb) => {
      const answers = zone[host];
      if (!answers)
        return cb(Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: "ENOTFOUND" }), []);
      cb(
        null,
        answers.map((address) => ({ address, family: address.includes(":") ? 6 : 4 })),
      );
    };
    const deny = probePolicy(true);
    const check = (url: string, policy = deny) => checkTarget(url, policy, { resolve });
    t.equal(await check("http://93.184.216.34/"), null);
    t.equal(
      await check("http://10.0.0.5:5678/"),
      "refused: 10.0.0.5 is a private address (PROBE_DENY_PRIVATE=true)",
    );
    t.match(await check("http://[::ffff:10.0.0.5]/"), /::ffff:a00:5 is a private address/);
    t.match(await check("http://[fe80::1]/"), /link-local/);
    t.match(
      await check("http://2130706433/"),
      /127\.0\.0\.1 is a loopback address/,
      "decimal IPv4, as the URL parser reads it",
    );
    t.equal(await check("https://public.test/"), null);
    t.equal(
      await check("https://internal.test/"),
      "refused: internal.test resolves to 10.0.0.5, a private address (PROBE_DENY_PRIVATE=true)",
    );
    t.match(
      await check("https://mixed.test/"),
      /mixed\.test resolves to 192\.168\.0\.10/,
      "one private answer refuses the name",
    );
    t.match(await check("https://v6.test/"), /fd00::5, a private address/);
    t.equal(
      await check("https://nowhere.test/"),
      null,
      "a name that does not resolve yet is judged when connecting",
    );
    t.equal(await check("https://internal.test/", probePolicy(false)), null, "nothing refused by default");
    const slow: Resolver = () => undefined; // never answers
    t.equal(
      await checkTarget("https://slow.test/", deny, { resolve: slow, timeoutMs: 50 }),
      null,
      "bounded in time",
    );
  },
);
