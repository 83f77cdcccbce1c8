import net from "node:net";

export interface CuttableProxy {
  /** The loopback port clients connect to instead of the target's. */
  port: number;
  /**
   * The target goes down as a stopped server does, from the clients' side: every open connection
   * is reset and new ones are refused (the port stops listening), until `restore`.
   */
  cut(): Promise<void>;
  /** Listens again on the same port and forwards to the target as before. */
  restore(): Promise<void>;
  close(): Promise<void>;
}

/**
 * A TCP proxy on loopback in front of a real server (a benchmark's PostgreSQL), that a benchmark
 * cuts to take the store away under a running Vigil without stopping a server others share: fault
 * injection on the network, as test/helpers/proxy.ts pauses it.
 */
export async function cuttableProxy(targetHost: string, targetPort: number): Promise<CuttableProxy> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(targetPort, targetHost);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on("close", () => sockets.delete(s));
      s.on("error", () => {
        client.destroy();
        upstream.destroy();
      });
    }
    client.pipe(upstream);
    upstream.pipe(client);
  });
  const listen = (port: number) =>
    new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, "127.0.0.1", () => {
        server.off("error", reject);
        resolve();
      });
    });
  await listen(0);
  const { port } = server.address() as net.AddressInfo;
  const stop = () =>
    new Promise<void>((resolve) => {
      for (const s of sockets) s.resetAndDestroy();
      if (!server.listening) return resolve();
      server.close(() => resolve());
    });
  return {
    port,
    cut: stop,
    restore: () => listen(port),
    close: stop,
  };
}
