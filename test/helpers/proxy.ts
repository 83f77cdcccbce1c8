import net from "node:net";

export interface PausableProxy {
  /** http://127.0.0.1:PORT, forwarding to the target. */
  url: string;
  /** Holds everything clients send until `resume` (the target sees nothing meanwhile). */
  pause(): void;
  /** Forwards what was held, in order, and everything after it. */
  resume(): void;
  close(): Promise<void>;
}

/**
 * A TCP proxy in front of a real server that can stop forwarding, to make the server look
 * stalled from Vigil's side without touching the server itself (fault injection on the
 * network, not a fake of the store).
 */
export async function pausableProxy(target: string): Promise<PausableProxy> {
  const { hostname, port } = new URL(target);
  let paused = false;
  // What clients sent while paused, in order; null stands for the client ending its side.
  const held: [net.Socket, Buffer | null][] = [];
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(port), hostname);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on("close", () => sockets.delete(s));
      s.on("error", () => {
        client.destroy();
        upstream.destroy();
      });
    }
    client.on("data", (d) => (paused ? held.push([upstream, d]) : upstream.write(d)));
    client.on("end", () => (paused ? held.push([upstream, null]) : upstream.end()));
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port: own } = server.address() as net.AddressInfo;
  return {
    url: `http://127.0.0.1:${own}`,
    pause: () => {
      paused = true;
    },
    resume: () => {
      paused = false;
      for (const [upstream, d] of held.splice(0)) {
        if (d) upstream.write(d);
        else upstream.end();
      }
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

export interface CuttableProxy {
  /** The proxy's port on 127.0.0.1. */
  port: number;
  /** Drops every connection and refuses new ones, as a server that went away. */
  cut(): void;
  restore(): void;
  close(): Promise<void>;
}

/**
 * A TCP proxy in front of a real server that can be cut: the server seems gone (connections
 * dropped, new ones refused) without stopping it (fault injection on the network).
 */
export async function cuttableProxy(target: URL, defaultPort = 5432): Promise<CuttableProxy> {
  const sockets = new Set<net.Socket>();
  let up = true;
  const server = net.createServer((client) => {
    if (!up) return client.destroy();
    const upstream = net.connect(Number(target.port || defaultPort), target.hostname);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on("close", () => sockets.delete(s));
      s.on("error", () => {});
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    port: (server.address() as net.AddressInfo).port,
    cut() {
      up = false;
      for (const s of sockets) s.destroy();
    },
    restore() {
      up = true;
    },
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}
