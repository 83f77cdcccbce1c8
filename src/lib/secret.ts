import { randomBytes } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import type { Config } from "../config.js";

export interface MasterSecrets {
  /** Encrypts new credentials and signs tokens. */
  current: string;
  /** Still accepted for decryption during a rotation (VIGIL_PREVIOUS_SECRETS). */
  previous: string[];
  /** True when the secret was generated into the data folder rather than configured. */
  generated: boolean;
}

/**
 * VIGIL_SECRET when set; otherwise a secret generated once into `VIGIL_DATA_DIR/secret`
 * (mode 0600) and reused. A generated secret is fine for one embedded node; a fleet must share
 * an explicit VIGIL_SECRET, or each node would encrypt with its own.
 */
export function resolveSecrets(config: Config, warn: (msg: string) => void = () => {}): MasterSecrets {
  if (config.secret) return { current: config.secret, previous: config.previousSecrets, generated: false };
  const file = path.join(config.dataDir, "secret");
  fs.mkdirSync(config.dataDir, { recursive: true });
  let secret: string;
  try {
    secret = fs.readFileSync(file, "utf8").trim();
  } catch {
    secret = randomBytes(48).toString("base64url");
    try {
      fs.writeFileSync(file, `${secret}\n`, { mode: 0o600, flag: "wx" });
    } catch {
      // another process wrote it first: use theirs
      secret = fs.readFileSync(file, "utf8").trim();
    }
    warn(
      `VIGIL_SECRET is not set: generated one into ${file}. Set VIGIL_SECRET in production (see docs/configuration.md).`,
    );
  }
  return { current: secret, previous: config.previousSecrets, generated: true };
}
