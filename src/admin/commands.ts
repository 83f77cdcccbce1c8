import { parseArgs } from "node:util";
import { addMember, createKey, createOrg, createUser, revokeKey } from "../identity/accounts.js";
import type { KeyStore } from "../identity/keys.js";
import { parsePermissions } from "../core/actor.js";
import type { CredentialBox } from "../lib/credentials.js";
import type { RelationalStore } from "../stores/relational/types.js";
import { userExists } from "../identity/repository.js";
import { deleteUserSessions, revokeUserGrants } from "../oauth/repository.js";
import { operatorTokens } from "../oauth/service.js";
import { reencryptCredentials } from "./reencrypt.js";

export const ADMIN_USAGE = `Usage: vigil admin <command> [options]   (prints one JSON object)

  create-user --email E [--plan free|pro|scale|enterprise] [--password P]
  create-org  --name N --owner USER_ID [--plan ...]
  add-member  --org ORG_ID --user USER_ID --role member|admin|owner
  create-key  --user USER_ID [--org ORG_ID] [--permissions LIST|all] [--name N]
  revoke-key  --id KEY_ID
  revoke-access --user USER_ID   end the user's OAuth grants (MCP tokens) and sign-in sessions
  mcp-token   --user USER_ID     OAuth tokens for the MCP tool server without a browser (Inspector CLI)
  reencrypt   re-encrypt stored credentials under the current VIGIL_SECRET`;

export class UsageError extends Error {
  override name = "UsageError";
}

const OPTIONS = {
  "create-user": { email: true, plan: false, password: false },
  "create-org": { name: true, owner: true, plan: false },
  "add-member": { org: true, user: true, role: true },
  "create-key": { user: true, org: false, permissions: false, name: false },
  "revoke-key": { id: true },
  "revoke-access": { user: true },
  "mcp-token": { user: true },
  reencrypt: {},
} as const satisfies Record<string, Record<string, boolean>>;

export type AdminCommand = keyof typeof OPTIONS;
export type AdminRequest = { command: AdminCommand; options: Record<string, string> };

/** Checks a command line before anything is opened, so a typo never touches the database. */
export function parseAdminArgs(argv: string[]): AdminRequest {
  const [command, ...rest] = argv;
  if (!command || !(command in OPTIONS))
    throw new UsageError(`${command ? `unknown command "${command}"` : "name a command"}\n${ADMIN_USAGE}`);
  const spec = OPTIONS[command as AdminCommand] as Record<string, boolean>;
  let values: Record<string, string | boolean | undefined>;
  try {
    values = parseArgs({
      args: rest,
      options: Object.fromEntries(Object.keys(spec).map((k) => [k, { type: "string" as const }])),
      strict: true,
      allowPositionals: false,
    }).values;
  } catch (err) {
    throw new UsageError(`${command}: ${(err as Error).message}`);
  }
  for (const [name, required] of Object.entries(spec)) {
    if (required && typeof values[name] !== "string")
      throw new UsageError(`${command}: --${name} is required`);
  }
  if (typeof values.permissions === "string") {
    try {
      parsePermissions(values.permissions);
    } catch (err) {
      throw new UsageError(`${command}: --${(err as Error).message}`);
    }
  }
  return { command: command as AdminCommand, options: values as Record<string, string> };
}

export interface AdminDeps {
  db: RelationalStore;
  credentials: CredentialBox;
  /** When run inside a server, its key cache (a revoked key stops at once). */
  keys?: KeyStore;
  /** When run inside a server, its clock (ctx.now); the CLI on its own uses the wall clock. */
  now?: () => Date;
  /** The master secrets and PUBLIC_URL (token signing: mcp-token). */
  secrets?: { current: string; previous: string[] };
  publicUrl?: string;
  /** When run inside a server: revokes and forgets its cached grants, so tokens stop at once there. */
  revokeUserAccess?: (userId: string) => Promise<{ grants: number; sessions: number }>;
}

export async function runAdmin(deps: AdminDeps, req: AdminRequest): Promise<unknown> {
  const o = req.options;
  switch (req.command) {
    case "create-user":
      return createUser(deps.db, { email: o.email as string, plan: o.plan, password: o.password });
    case "create-org":
      return createOrg(deps.db, { name: o.name as string, owner: o.owner as string, plan: o.plan });
    case "add-member": {
      const result = await addMember(deps.db, {
        org: o.org as string,
        user: o.user as string,
        role: o.role as string,
        at: deps.now?.(),
      });
      deps.keys?.invalidate((p) => p.userId === o.user);
      return result;
    }
    case "create-key":
      return createKey(deps.db, {
        user: o.user as string,
        org: o.org,
        permissions: parsePermissions(o.permissions ?? "all"),
        name: o.name,
        at: deps.now?.(),
      });
    case "revoke-key": {
      // a server passes its clock; the CLI on its own has only the wall clock
      const result = await revokeKey(deps.db, o.id as string, deps.now ? deps.now() : new Date());
      deps.keys?.invalidate((p) => p.keyId === o.id);
      return result;
    }
    case "revoke-access": {
      const user = o.user as string;
      if (!(await userExists(deps.db, user))) throw new Error(`no user with id ${user}`);
      const now = deps.now ? deps.now() : new Date();
      const revoked = deps.revokeUserAccess
        ? await deps.revokeUserAccess(user)
        : {
            grants: (await revokeUserGrants(deps.db, user, now)).length,
            sessions: await deleteUserSessions(deps.db, user),
          };
      return { user_id: user, ...revoked };
    }
    case "mcp-token": {
      const user = o.user as string;
      if (!(await userExists(deps.db, user))) throw new Error(`no user with id ${user}`);
      if (!deps.secrets || !deps.publicUrl)
        throw new Error("mcp-token needs the server's secret and PUBLIC_URL");
      const now = deps.now ? deps.now() : new Date();
      return operatorTokens(deps.db, { secrets: deps.secrets, publicUrl: deps.publicUrl, now }, user);
    }
    case "reencrypt":
      return reencryptCredentials(deps.db, deps.credentials);
  }
}
