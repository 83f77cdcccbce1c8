import { execFileSync } from "node:child_process";
import path from "node:path";
import type { Config } from "../../src/config.js";
import { packageRoot } from "../../src/lib/paths.js";

export interface QuestdbTarget {
  httpUrl: string;
  pgUrl: string;
  stop(): void;
}

/**
 * The QuestDB a benchmark writes to: QUESTDB_URL when set, else a private server started with
 * scripts/questdb.sh on its own ports and folder, and stopped when the benchmark ends.
 */
export function benchQuestdb(config: Config, log: (s: string) => void): QuestdbTarget {
  if (config.questdb) return { ...config.questdb, stop() {} };
  const env = {
    ...process.env,
    QUESTDB_DIR: path.join(packageRoot, ".questdb/bench"),
    QUESTDB_HTTP_PORT: "19200",
    QUESTDB_PG_PORT: "19212",
    QUESTDB_ILP_PORT: "19209",
    QUESTDB_HTTP_MIN_PORT: "19203",
  };
  const script = path.join(packageRoot, "scripts/questdb.sh");
  log("QUESTDB_URL is unset: starting a private QuestDB for this run (scripts/questdb.sh)");
  execFileSync("bash", [script, "start"], { env, stdio: ["ignore", "inherit", "inherit"] });
  return {
    httpUrl: "http://127.0.0.1:19200",
    pgUrl: "postgres://admin:quest@127.0.0.1:19212/qdb",
    stop() {
      execFileSync("bash", [script, "stop"], { env, stdio: ["ignore", "inherit", "inherit"] });
    },
  };
}
