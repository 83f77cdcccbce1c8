import t from "tap";
import { testApp } from "../helpers/app.js";
import { seedRouteWorld } from "../helpers/route-samples.js";
import {
  allowTime,
  FUZZ_BACKEND_RUNS,
  FUZZ_SEED,
  fuzzRoutes,
  printTable,
  productionStores,
} from "./harness.js";

/**
 * The REST fuzz pass again, smaller, on the production stores: PostgreSQL for the relational
 * store and QuestDB for the series (what a store refuses, or how it sums and orders, differs from
 * PGlite's). Skipped when they are not reachable (failed under CI=true, as every backend test).
 */
allowTime(t);

t.test(
  `REST routes, fuzzed on PostgreSQL + QuestDB (seed ${FUZZ_SEED}, ${FUZZ_BACKEND_RUNS} runs a route)`,
  async (t) => {
    if (!(await productionStores(t))) return;
    const ta = await testApp(t, { relational: "postgres", series: "questdb" });
    const w = await seedRouteWorld(ta);
    const checker = await fuzzRoutes(t, ta, w, {
      runs: FUZZ_BACKEND_RUNS,
      seed: FUZZ_SEED,
      label: "postgres+questdb",
      // every account is read before and after; the pass on PGlite also reads after each resource
      readAfterEachResource: false,
    });
    printTable(
      t,
      "2-rest-postgres-questdb",
      checker.tally.table(`requests tried per route (postgres + questdb, seed ${FUZZ_SEED})`),
    );
  },
);
