import t from "tap";
import { testApp } from "../helpers/app.js";
import { seedRouteWorld } from "../helpers/route-samples.js";
import { allowTime, FUZZ_RUNS, FUZZ_SEED, fuzzRoutes, printTable } from "./harness.js";

/**
 * Every route of the REST table, fuzzed on PGlite (issue 16): requests made from each route's
 * valid samples and its OpenAPI description, mutated (harness.ts, `Checker`, says what every answer must be),
 * with every read of every account checked after each route that writes. Prints the requests
 * tried per route. `npm run fuzz -- --runs N` runs more.
 */
allowTime(t);

t.test(`REST routes, fuzzed on PGlite (seed ${FUZZ_SEED}, ${FUZZ_RUNS} runs a route)`, async (t) => {
  const ta = await testApp(t);
  const w = await seedRouteWorld(ta);
  const checker = await fuzzRoutes(t, ta, w, { runs: FUZZ_RUNS, seed: FUZZ_SEED, label: "pglite" });
  printTable(t, "1-rest-pglite", checker.tally.table(`requests tried per route (pglite, seed ${FUZZ_SEED})`));
});
