import t from "tap";
import { GroupCommit } from "../../src/stores/series/group-commit.js";

// GroupCommit is pure scheduling; here its flush is a function we observe, not a database.

t.test("concurrent submissions share flushes and each resolves after its own flush", async (t) => {
  const flushes: number[][] = [];
  let committed = new Set<number>();
  const gc = new GroupCommit<number>({
    flush: async (items) => {
      flushes.push(items);
      await new Promise((r) => setTimeout(r, 10));
      committed = new Set([...committed, ...items]);
    },
  });
  const settled: number[] = [];
  await Promise.all(
    Array.from({ length: 50 }, (_, i) =>
      gc.submit([i]).then(() => {
        t.ok(committed.has(i), `item ${i} acknowledged only after it was flushed`);
        settled.push(i);
      }),
    ),
  );
  t.equal(settled.length, 50);
  t.ok(flushes.length <= 3, `50 submissions went out in ${flushes.length} flushes`);
  t.equal(flushes.flat().length, 50, "every item flushed once");
});

t.test("a failing flush rejects its callers; data errors are isolated to the bad submission", async (t) => {
  const gc = new GroupCommit<string>({
    isDataError: (e) => (e as Error).message === "bad data",
    flush: async (items) => {
      await new Promise((r) => setTimeout(r, 5));
      if (items.includes("poison")) throw new Error("bad data");
    },
  });
  await gc.submit(["warm"]); // so the next ones queue behind an in-flight flush
  const block = gc.submit(["first"]);
  const results = await Promise.allSettled([gc.submit(["ok-1"]), gc.submit(["poison"]), gc.submit(["ok-2"])]);
  await block;
  t.same(
    results.map((r) => r.status),
    ["fulfilled", "rejected", "fulfilled"],
  );
  t.equal(gc.backlog, 0, "submissions retried one by one leave the backlog once answered");

  const down = new GroupCommit<string>({
    flush: async () => {
      throw new Error("connection refused");
    },
  });
  const all = await Promise.allSettled([down.submit(["a"]), down.submit(["b"])]);
  t.ok(
    all.every((r) => r.status === "rejected"),
    "an unreachable store acknowledges nothing",
  );
  await down.drain();
  t.equal(down.backlog, 0);
});

t.test("maxItems bounds a flush; drain waits for everything", async (t) => {
  const sizes: number[] = [];
  const gc = new GroupCommit<number>({
    maxItems: 10,
    flush: async (items) => {
      sizes.push(items.length);
      await new Promise((r) => setTimeout(r, 2));
    },
  });
  for (let i = 0; i < 8; i++) void gc.submit([1, 2, 3, 4]);
  await gc.drain();
  t.ok(
    sizes.every((s) => s <= 10),
    `flush sizes ${sizes.join(",")}`,
  );
  t.equal(
    sizes.reduce((a, b) => a + b, 0),
    32,
  );
  t.equal(gc.backlog, 0);
});

t.test(
  "backlog counts items queued and in flight until their flush answers, success or failure",
  async (t) => {
    let release: (ok: boolean) => void = () => {};
    const gc = new GroupCommit<number>({
      flush: () =>
        new Promise<void>((resolve, reject) => {
          release = (ok) => (ok ? resolve() : reject(new Error("store down")));
        }),
    });
    const a = gc.submit([1, 2, 3]); // in flight
    const b = gc.submit([4, 5]); // queued behind it
    t.equal(gc.backlog, 5);
    release(true);
    await a;
    t.equal(gc.backlog, 2, "the answered flush left the backlog; the queued items are now in flight");
    await new Promise((r) => setImmediate(r));
    release(false);
    await t.rejects(b, /store down/);
    t.equal(gc.backlog, 0, "a failed flush leaves the backlog too");
  },
);
