import t from "tap";
import { nextSlot } from "../../src/probes/schedule.js";

t.test("next slot: same phase every time, never sooner than half an interval", async (t) => {
  const interval = 300;
  const bad: string[] = [];
  const start = Date.parse("2026-11-22T00:00:00Z");
  for (let c = 0; c < 200; c++) {
    const id = `conn_${c}`;
    const first = nextSlot(id, interval, new Date(start));
    const phase = first.getTime() % (interval * 1000);
    for (let step = 0; step < 20; step++) {
      const at = new Date(start + step * 37_123);
      const next = nextSlot(id, interval, at);
      const gap = next.getTime() - at.getTime();
      if (
        gap < (interval * 1000) / 2 ||
        gap > interval * 1500 ||
        next.getTime() % (interval * 1000) !== phase
      )
        bad.push(`${id} at ${at.toISOString()}: next ${next.toISOString()}`);
    }
  }
  t.same(bad.slice(0, 5), [], "4,000 slots: one phase, at least half an interval ahead");
  // an on-time check keeps its slot: the next one is exactly one interval later
  const slot = nextSlot("conn_x", interval, new Date(start));
  t.equal(
    nextSlot("conn_x", interval, new Date(slot.getTime() + 50)).getTime(),
    slot.getTime() + interval * 1000,
  );
});
