/**
 * Preloaded into the `vigil serve` processes of `vigil bench soak` (NODE_OPTIONS=--import=…):
 * every 10 s appends one JSON line to the file named by VIGIL_SOAK_METER with the process's own
 * view of its memory (process.memoryUsage: RSS, V8 heap used and reserved, external and
 * ArrayBuffer memory) and its active handles (process.getActiveResourcesInfo: sockets, timers,
 * file handles…), which /proc cannot tell apart. With VIGIL_SOAK_GC=1 (and --expose-gc) a full
 * garbage collection runs first, so `heapUsed` is the live heap. Vigil itself is not changed: the
 * timer is unref'd and does nothing else.
 */
import fs from "node:fs";

const file = process.env.VIGIL_SOAK_METER;
const forceGc = process.env.VIGIL_SOAK_GC === "1";
if (file) {
  const timer = setInterval(() => {
    const gc = (globalThis as { gc?: () => void }).gc;
    if (forceGc && gc) gc();
    const resources = process.getActiveResourcesInfo();
    const m = process.memoryUsage();
    fs.appendFileSync(
      file,
      `${JSON.stringify({
        t: Date.now(),
        rss: m.rss,
        heapUsed: m.heapUsed,
        heapTotal: m.heapTotal,
        external: m.external,
        arrayBuffers: m.arrayBuffers,
        // the meter's own timer is one of them
        handles: resources.length - 1,
        byKind: resources.reduce<Record<string, number>>((a, r) => ((a[r] = (a[r] ?? 0) + 1), a), {}),
      })}\n`,
    );
  }, 10_000);
  timer.unref();
}
