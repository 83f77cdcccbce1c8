/**
 * Request budgets count per clock hour (src/ratelimit). A test that spends a whole window starts
 * at least a minute before the hour ends, or waits for the next one: a window that turns over
 * mid-test gives the budget back (a run that crossed 14:00 UTC saw 4 requests left where 0 were
 * due, then 200 instead of 429).
 */
export async function clearOfHourEnd(margin = 60_000): Promise<void> {
  const left = 3_600_000 - (Date.now() % 3_600_000);
  if (left < margin) await new Promise((r) => setTimeout(r, left + 500));
}
