import dns from "node:dns";
import net, { BlockList } from "node:net";
import type { Socket } from "node:net";
import { Agent, buildConnector } from "undici";

/**
 * Outbound safety: which addresses Vigil's own HTTP requests (probes and platform syncs, webhook
 * deliveries) may connect to. One classifier of IP addresses, one policy per kind of request,
 * and one undici dispatcher that applies the policy *when it connects*: the literal address of a
 * URL, every DNS answer for a host name (so a name that resolves, or is rebound, into a refused
 * range is refused, not only a literal IP), and the address the socket really reached. A refused
 * request fails before a byte of it is written, with an error that says what was refused and why:
 * `refused: 10.0.0.5 is a private address (PROBE_DENY_PRIVATE=true)`.
 */

export type AddressKind =
  | "public"
  | "unspecified"
  | "loopback"
  | "private"
  | "shared"
  | "link_local"
  | "metadata"
  | "multicast"
  | "reserved";

/** How a refusal names each kind, after "is". */
export const KIND_LABEL: Record<AddressKind, string> = {
  public: "a public address",
  unspecified: "an unspecified address (this host)",
  loopback: "a loopback address",
  private: "a private address",
  shared: "a shared (carrier-grade NAT) address",
  link_local: "a link-local address",
  metadata: "a cloud metadata address",
  multicast: "a multicast address",
  reserved: "a reserved (non-routable) address",
};

/** The ranges of each non-public kind (IANA special-purpose registries, RFC 6890 and its updates). */
const RANGES: [Exclude<AddressKind, "public">, string, number, "ipv4" | "ipv6"][] = [
  // Cloud metadata services: AWS/GCP/Azure/OpenStack, AWS over IPv6, Alibaba. Before link-local and shared.
  ["metadata", "169.254.169.254", 32, "ipv4"],
  ["metadata", "fd00:ec2::254", 128, "ipv6"],
  ["metadata", "100.100.100.200", 32, "ipv4"],
  ["unspecified", "0.0.0.0", 8, "ipv4"],
  ["unspecified", "::", 128, "ipv6"],
  ["loopback", "127.0.0.0", 8, "ipv4"],
  ["loopback", "::1", 128, "ipv6"],
  ["private", "10.0.0.0", 8, "ipv4"],
  ["private", "172.16.0.0", 12, "ipv4"],
  ["private", "192.168.0.0", 16, "ipv4"],
  ["private", "fc00::", 7, "ipv6"],
  ["shared", "100.64.0.0", 10, "ipv4"],
  ["link_local", "169.254.0.0", 16, "ipv4"],
  ["link_local", "fe80::", 10, "ipv6"],
  ["multicast", "224.0.0.0", 4, "ipv4"],
  ["multicast", "ff00::", 8, "ipv6"],
  ["reserved", "240.0.0.0", 4, "ipv4"], // incl. 255.255.255.255
  ["reserved", "192.0.0.0", 24, "ipv4"], // IETF protocol assignments
  ["reserved", "192.0.2.0", 24, "ipv4"], // TEST-NET-1
  ["reserved", "198.18.0.0", 15, "ipv4"], // benchmarking
  ["reserved", "198.51.100.0", 24, "ipv4"], // TEST-NET-2
  ["reserved", "203.0.113.0", 24, "ipv4"], // TEST-NET-3
  ["reserved", "192.88.99.0", 24, "ipv4"], // 6to4 relay anycast (deprecated)
  ["reserved", "::", 96, "ipv6"], // IPv4-compatible (deprecated); :: and ::1 are matched first
  ["reserved", "100::", 64, "ipv6"], // discard-only
  ["reserved", "2001::", 32, "ipv6"], // Teredo: tunnels to an IPv4 address Vigil cannot see
  ["reserved", "2001:db8::", 32, "ipv6"], // documentation
];

/** One BlockList per kind, in the order of RANGES (the first kind that matches wins). */
const LISTS: [Exclude<AddressKind, "public">, BlockList][] = (() => {
  const byKind = new Map<Exclude<AddressKind, "public">, BlockList>();
  for (const [kind, address, prefix, family] of RANGES) {
    let list = byKind.get(kind);
    if (!list) byKind.set(kind, (list = new BlockList()));
    list.addSubnet(address, prefix, family);
  }
  return [...byKind];
})();
const GLOBAL_UNICAST_V6 = new BlockList();
GLOBAL_UNICAST_V6.addSubnet("2000::", 3, "ipv6");

/** An IPv6 address as its 8 16-bit groups (a trailing dotted IPv4 included), or null. */
function ipv6Groups(ip: string): number[] | null {
  let s = ip.replace(/%.*$/, "").toLowerCase();
  const dotted = /^(.*:)(\d+\.\d+\.\d+\.\d+)$/.exec(s);
  if (dotted) {
    const o = (dotted[2] as string).split(".").map(Number);
    s = `${dotted[1]}${(((o[0] ?? 0) << 8) | (o[1] ?? 0)).toString(16)}:${(((o[2] ?? 0) << 8) | (o[3] ?? 0)).toString(16)}`;
  }
  const [head, tail, more] = s.split("::");
  if (more !== undefined) return null;
  const part = (p: string | undefined) => (p ? p.split(":") : []);
  const h = part(head);
  const t = part(tail);
  const groups =
    tail === undefined ? h : [...h, ...Array<string>(Math.max(0, 8 - h.length - t.length)).fill("0"), ...t];
  if (groups.length !== 8 || groups.some((g) => !/^[0-9a-f]{1,4}$/.test(g))) return null;
  return groups.map((g) => parseInt(g, 16));
}

const v4 = (hi: number, lo: number) => `${hi >> 8}.${hi & 0xff}.${lo >> 8}.${lo & 0xff}`;

/**
 * The IPv4 address an IPv6 address carries to an IPv4 host, which decides where it really goes:
 * IPv4-mapped `::ffff:a.b.c.d` (and the SIIT form `::ffff:0:a.b.c.d`), NAT64 `64:ff9b::a.b.c.d`
 * (DNS64 networks give every IPv4-only host such an address) and 6to4 `2002:aabb:ccdd::`.
 */
export function embeddedIpv4(ip: string): string | null {
  const g = ipv6Groups(ip);
  if (!g) return null;
  const zeros = (from: number, to: number) => g.slice(from, to).every((x) => x === 0);
  if (zeros(0, 5) && g[5] === 0xffff) return v4(g[6] as number, g[7] as number);
  if (zeros(0, 4) && g[4] === 0xffff && g[5] === 0) return v4(g[6] as number, g[7] as number);
  if (g[0] === 0x64 && g[1] === 0xff9b && zeros(2, 6)) return v4(g[6] as number, g[7] as number);
  if (g[0] === 0x2002) return v4(g[1] as number, g[2] as number);
  return null;
}

/**
 * What kind of address `ip` is (IPv4 or IPv6 text, an IPv6 zone id ignored). An IPv6 address
 * that carries an IPv4 one (mapped, NAT64, 6to4) is the kind of that IPv4 address; an IPv6
 * address outside global unicast (2000::/3) and the listed ranges is `reserved`. Not an IP
 * address at all: null.
 */
export function classifyAddress(ip: string): AddressKind | null {
  const address = ip.replace(/^\[|\]$/g, "").replace(/%.*$/, "");
  const family = net.isIP(address);
  if (family === 0) return null;
  if (family === 6) {
    const inner = embeddedIpv4(address);
    if (inner !== null) return classifyAddress(inner);
  }
  const type = family === 4 ? "ipv4" : "ipv6";
  for (const [kind, list] of LISTS) if (list.check(address, type)) return kind;
  if (family === 6 && !GLOBAL_UNICAST_V6.check(address, "ipv6")) return "reserved";
  return "public";
}

/** Every kind but `public`: what PROBE_DENY_PRIVATE=true refuses. */
export const NON_PUBLIC: readonly AddressKind[] = [
  "unspecified",
  "loopback",
  "private",
  "shared",
  "link_local",
  "metadata",
  "multicast",
  "reserved",
];

/** Whom an outbound request serves, and what it may reach. */
export interface OutboundPolicy {
  /** Named in refusals: "probes", "webhooks". */
  purpose: string;
  /** Kinds refused whatever the setting, with the rule named in the refusal. */
  alwaysDeny?: { kinds: readonly AddressKind[]; rule: string };
  /** PROBE_DENY_PRIVATE=true: every non-public kind is refused (except `allowKinds`). */
  denyPrivate: boolean;
  /** Kinds allowed even when denying private (webhooks: loopback with WEBHOOK_ALLOW_HTTP_LOOPBACK). */
  allowKinds?: readonly AddressKind[];
  /** Addresses or CIDR ranges allowed whatever their kind (not configurable yet; tests use it). */
  exempt?: readonly string[];
}

/** The policy of probes and platform syncs: everything unless PROBE_DENY_PRIVATE=true. */
export const probePolicy = (denyPrivate: boolean): OutboundPolicy => ({ purpose: "probes", denyPrivate });

/**
 * The policy of webhook deliveries: link-local and cloud metadata addresses never; every other
 * non-public address with PROBE_DENY_PRIVATE=true, except loopback while WEBHOOK_ALLOW_HTTP_LOOPBACK
 * is true (the operator's explicit "a receiver on this machine").
 */
export const webhookPolicy = (denyPrivate: boolean, allowHttpLoopback: boolean): OutboundPolicy => ({
  purpose: "webhooks",
  alwaysDeny: {
    kinds: ["link_local", "metadata"],
    rule: "webhooks are never sent to link-local or cloud metadata addresses",
  },
  denyPrivate,
  allowKinds: allowHttpLoopback ? ["loopback"] : [],
});

function exemptList(cidrs: readonly string[] | undefined): BlockList | null {
  if (!cidrs?.length) return null;
  const list = new BlockList();
  for (const c of cidrs) {
    const [address = "", prefix] = c.split("/");
    const type = net.isIP(address) === 6 ? "ipv6" : "ipv4";
    if (prefix === undefined) list.addAddress(address, type);
    else list.addSubnet(address, Number(prefix), type);
  }
  return list;
}

const exemptCache = new WeakMap<OutboundPolicy, BlockList | null>();

/**
 * Why `policy` refuses a connection to `ip`, as a sentence (`refused: 10.0.0.5 is a private
 * address (PROBE_DENY_PRIVATE=true)`; with `host`, `refused: db.internal resolves to 10.0.0.5, a
 * private address (…)`), or null when it may go there.
 */
export function refusal(ip: string, policy: OutboundPolicy, host?: string): string | null {
  const address = ip.replace(/^\[|\]$/g, "");
  const kind = classifyAddress(address);
  if (kind === null || kind === "public") return null;
  if (!exemptCache.has(policy)) exemptCache.set(policy, exemptList(policy.exempt));
  const exempt = exemptCache.get(policy);
  const plain = address.replace(/%.*$/, "");
  if (exempt?.check(plain, net.isIP(plain) === 6 ? "ipv6" : "ipv4")) return null;
  let rule: string | null = null;
  if (policy.alwaysDeny?.kinds.includes(kind)) rule = policy.alwaysDeny.rule;
  else if (policy.denyPrivate && !policy.allowKinds?.includes(kind)) rule = "PROBE_DENY_PRIVATE=true";
  if (rule === null) return null;
  const what =
    host && host.replace(/^\[|\]$/g, "") !== address
      ? `${host} resolves to ${address}, ${KIND_LABEL[kind]}`
      : `${address} is ${KIND_LABEL[kind]}`;
  return `refused: ${what} (${rule})`;
}

/** The error of a refused connection: `code` ERR_OUTBOUND_REFUSED, the message says what and why. */
export class OutboundRefusedError extends Error {
  readonly code = "ERR_OUTBOUND_REFUSED";
  constructor(
    message: string,
    readonly address: string,
  ) {
    super(message);
    this.name = "OutboundRefusedError";
  }
}

/** Whether an error (or its cause) is a refusal of the outbound policy. */
export function refusedBy(err: unknown): OutboundRefusedError | null {
  for (let e = err, i = 0; e && i < 5; e = (e as { cause?: unknown }).cause, i++)
    if (e instanceof OutboundRefusedError || (e as { code?: unknown }).code === "ERR_OUTBOUND_REFUSED")
      return e as OutboundRefusedError;
  return null;
}

type LookupAddress = { address: string; family: number };
type LookupCallback = (
  err: NodeJS.ErrnoException | null,
  address: string | LookupAddress[],
  family?: number,
) => void;
/** The shape of `dns.lookup` with `all: true`, which the guard calls (a test may give its own). */
export type Resolver = (
  hostname: string,
  options: dns.LookupAllOptions,
  callback: (err: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void,
) => void;

const systemResolver: Resolver = (hostname, options, callback) => dns.lookup(hostname, options, callback);

/**
 * A `lookup` for `net.connect` that resolves the name (every address) and refuses the
 * connection when any answer is in a range the policy refuses: a name with one private address
 * among public ones is refused whole, so which address the connection would pick does not matter.
 */
export function guardedLookup(policy: OutboundPolicy, resolve: Resolver = systemResolver) {
  return (
    hostname: string,
    options: dns.LookupOptions | number | LookupCallback,
    cb?: LookupCallback,
  ): void => {
    const callback = (typeof options === "function" ? options : cb) as LookupCallback;
    const opts: dns.LookupOptions =
      typeof options === "function" ? {} : typeof options === "number" ? { family: options } : options;
    resolve(hostname, { ...opts, all: true }, (err, addresses) => {
      if (err) return callback(err, []);
      for (const a of addresses) {
        const why = refusal(a.address, policy, hostname);
        if (why) return callback(new OutboundRefusedError(why, a.address), []);
      }
      if (opts.all) return callback(null, addresses);
      const first = addresses[0];
      if (!first)
        return callback(Object.assign(new Error(`no address for ${hostname}`), { code: "ENOTFOUND" }), []);
      callback(null, first.address, first.family);
    });
  };
}

export interface OutboundAgentOptions {
  policy: OutboundPolicy;
  /** Connections kept per origin. */
  connections?: number;
  keepAliveTimeoutMs?: number;
  /** TCP (and TLS) connect timeout. */
  connectTimeoutMs?: number;
  /** DNS resolution (default: the system's, `dns.lookup`). */
  resolve?: Resolver;
}

/**
 * An undici Agent whose every new connection passes the policy: a literal IP host is checked
 * before connecting, a host name through `guardedLookup` (at each connection, so a rebound name
 * is checked again), and the address the socket reached once more before the request is written
 * (whatever way it was resolved). Redirects: undici's `request` never follows them.
 */
export function createOutboundAgent(opts: OutboundAgentOptions): Agent {
  const { policy } = opts;
  const base = buildConnector({
    timeout: opts.connectTimeoutMs ?? 10_000,
    lookup: guardedLookup(policy, opts.resolve),
  } as buildConnector.BuildOptions);
  const connect: buildConnector.connector = (options, callback) => {
    const host = options.hostname.replace(/^\[|\]$/g, "");
    if (net.isIP(host)) {
      const why = refusal(host, policy);
      if (why) return callback(new OutboundRefusedError(why, host), null);
    }
    base(options, (err, socket) => {
      if (err || !socket) return callback(err ?? new Error("no socket"), null);
      const remote = (socket as Socket).remoteAddress;
      const why = remote ? refusal(remote, policy, net.isIP(host) ? undefined : host) : null;
      if (why) {
        socket.destroy();
        return callback(new OutboundRefusedError(why, remote as string), null);
      }
      callback(null, socket);
    });
  };
  return new Agent({
    connections: opts.connections ?? 8,
    keepAliveTimeout: opts.keepAliveTimeoutMs ?? 30_000,
    pipelining: 1,
    connect,
  });
}

/**
 * Whether a target URL's host passes the policy now: a literal IP is judged as it is, a name by
 * resolving it (within `timeoutMs`). Answers the refusal or null; a name that does not resolve
 * (yet), or not in time, is not refused here: the connection is checked again when it is made.
 */
export async function checkTarget(
  url: string,
  policy: OutboundPolicy,
  opts: { timeoutMs?: number; resolve?: Resolver } = {},
): Promise<string | null> {
  if (!URL.canParse(url)) return null;
  const host = new URL(url).hostname.replace(/^\[|\]$/g, "");
  if (net.isIP(host)) return refusal(host, policy);
  const resolve = opts.resolve ?? systemResolver;
  const answers = await new Promise<LookupAddress[]>((done) => {
    const timer = setTimeout(() => done([]), opts.timeoutMs ?? 2_000);
    resolve(host, { all: true }, (err, addresses) => {
      clearTimeout(timer);
      done(err ? [] : addresses);
    });
  });
  for (const a of answers) {
    const why = refusal(a.address, policy, host);
    if (why) return why;
  }
  return null;
}
