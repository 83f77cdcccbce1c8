import type { Config } from "../config.js";
import { AccountError } from "../identity/accounts.js";
import { CredentialBox } from "../lib/credentials.js";
import { resolveSecrets } from "../lib/secret.js";
import { dataDirOwner } from "../stores/relational/dir-lock.js";
import { migrate } from "../stores/relational/migrate.js";
import { openRelational } from "../stores/index.js";
import { parseAdminArgs, runAdmin, UsageError } from "./commands.js";
import { sendToAdminSocket } from "./socket.js";

/**
 * `vigil admin …`: prints one JSON object and exits 0, or prints the error on stderr and exits
 * non-zero (2 for a usage error, 1 otherwise). Works whether or not a server runs on the same
 * data: on Postgres it opens the database itself; in embedded mode, when a server holds the
 * folder, the server does the work over its admin socket.
 */
export async function adminMain(config: Config, argv: string[]): Promise<number> {
  const out = (v: unknown) => process.stdout.write(`${JSON.stringify(v)}\n`);
  const err = (m: string) => process.stderr.write(`vigil admin: ${m}\n`);
  let request: ReturnType<typeof parseAdminArgs>;
  try {
    request = parseAdminArgs(argv);
  } catch (e) {
    err((e as Error).message);
    return 2;
  }

  if (!config.databaseUrl) {
    const owner = dataDirOwner(config.dataDir);
    if (owner !== undefined) {
      try {
        const answer = await sendToAdminSocket(config.dataDir, argv);
        if (answer.ok) {
          out(answer.result);
          return 0;
        }
        err(answer.error ?? "failed");
        return 1;
      } catch (e) {
        err(
          `Vigil (pid ${owner}) holds ${config.dataDir} but its admin socket did not answer (${(e as Error).message}). ` +
            "Stop it and run the command again, or retry once it has finished starting.",
        );
        return 1;
      }
    }
  }

  const db = await openRelational(config);
  try {
    await migrate(db);
    const secrets = resolveSecrets(config, (m) => process.stderr.write(`warning: ${m}\n`));
    const credentials = new CredentialBox(secrets);
    out(await runAdmin({ db, credentials, secrets, publicUrl: config.publicUrl }, request));
    return 0;
  } catch (e) {
    if (e instanceof UsageError) {
      err(e.message);
      return 2;
    }
    if (e instanceof AccountError) {
      err(e.message);
      return 1;
    }
    throw e;
  } finally {
    await db.close();
  }
}
