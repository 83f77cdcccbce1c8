import path from "node:path";
import { packageRoot } from "../../src/lib/paths.js";

/** The built `vigil` command, for benchmarks that run it as a separate process. */
export const CLI_PATH = path.join(packageRoot, "dist/src/cli.js");
