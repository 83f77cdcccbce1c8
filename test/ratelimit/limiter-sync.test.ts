import t from "tap";
import { createLogger } from "../../src/lib/logger.js";
import { migrate } from "../../src/stores/relational/migrate.js";
import { RateLimiter } from "../../src/ratelimit/limiter.js";
import { freshRelational } from "../helpers/backends.js";

/*
 * A node's count while its sync is out: the requests it is adding to the shared row are not in
 * the shared total it last read, and must still count, or every sync opens a gap through which a
 * busy node admits past the limit (found by test/process/shared-state.test.ts on a loaded host).
 */
t.test("requests being synced still count against the limit", async (t) => {
  const db = await freshRelational(t, "pglite");
  await migrate(db);
  const limiter = new RateLimiter(() => db, createLogger("silent"), { syncMs: 3_600_000 });
  t.teardown(() => limiter.close());
  let allowed = 0;
  for (let i = 0; i < 6; i++) if ((await limiter.take("acct", 10)).allowed) allowed++;
  t.equal(allowed, 6);
  const sync = limiter.syncAll(); // adds the 6 to the shared row; takes a round trip
  for (let i = 0; i < 10; i++) if ((await limiter.take("acct", 10)).allowed) allowed++;
  await sync;
  for (let i = 0; i < 3; i++) if ((await limiter.take("acct", 10)).allowed) allowed++;
  t.equal(allowed, 10, "10 admitted in all, during the sync and after it");
});
