import t from "tap";
import { costUsd, PriceBook } from "../../src/ingest/pricing.js";
import { freshRelational } from "../helpers/backends.js";

t.test("pricing table: name variants, effective dates, unknown models", async (t) => {
  const db = await freshRelational(t, "pglite");
  const book = new PriceBook(() => db);
  const now = new Date("2026-06-01T00:00:00Z");
  t.equal((await book.priceOf("claude-sonnet-4-5", now))?.inputPerMtok, 3);
  t.equal(
    (await book.priceOf("anthropic/claude-sonnet-4-5", now))?.model,
    "claude-sonnet-4-5",
    "vendor prefix",
  );
  t.equal((await book.priceOf("claude-sonnet-4-5-20250929", now))?.model, "claude-sonnet-4-5", "date suffix");
  t.equal((await book.priceOf("gpt-4o-2024-08-06", now))?.model, "gpt-4o", "longest known prefix");
  t.equal(
    (await book.priceOf("gpt-4o-mini-2024-07-18", now))?.model,
    "gpt-4o-mini",
    "prefers the longer name",
  );
  t.equal(await book.priceOf("my-local-llama", now), null, "unknown model");
  t.equal(
    await book.priceOf("gpt-4o", new Date("2024-01-01T00:00:00Z")),
    null,
    "no price before the first effective date",
  );

  // a price change applies from its date on; earlier usage keeps the old price
  await db.query(
    "INSERT INTO model_prices (model, effective_from, input_per_mtok, output_per_mtok) VALUES ('gpt-4o', '2026-03-01', 2, 8)",
  );
  book.invalidate();
  t.equal((await book.priceOf("gpt-4o", new Date("2026-02-01T00:00:00Z")))?.inputPerMtok, 2.5);
  t.equal((await book.priceOf("gpt-4o", now))?.inputPerMtok, 2);
  const p = await book.priceOf("claude-sonnet-4-5", now);
  t.ok(p);
  if (p)
    t.equal(
      costUsd(p, { input: 1_000_000, output: 1_000_000, cacheRead: 1_000_000, cacheWrite: 1_000_000 }),
      3 + 15 + 0.3 + 3.75,
    );
});
