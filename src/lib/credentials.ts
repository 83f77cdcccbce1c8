import { createCipheriv, createDecipheriv, createHash, hkdfSync, randomBytes } from "node:crypto";
import type { MasterSecrets } from "./secret.js";

/**
 * Platform credentials at rest: AES-256-GCM with a key derived (HKDF-SHA256) from the master
 * secret. The stored text is `v1.<kid>.<iv>.<tag>.<ciphertext>` (base64url), where `kid`
 * identifies the master secret, so credentials written under a previous secret still decrypt
 * during a rotation and `vigil admin reencrypt` can find the ones to rewrite.
 */
export class CredentialBox {
  private readonly keys = new Map<string, Buffer>();
  readonly currentKid: string;

  constructor(secrets: Pick<MasterSecrets, "current" | "previous">) {
    this.currentKid = this.add(secrets.current);
    for (const s of secrets.previous) this.add(s);
  }

  private add(secret: string): string {
    const kid = createHash("sha256").update(`vigil kid:${secret}`).digest("hex").slice(0, 12);
    this.keys.set(kid, Buffer.from(hkdfSync("sha256", secret, "vigil", "credentials v1", 32)));
    return kid;
  }

  encrypt(plaintext: string): string {
    const key = this.keys.get(this.currentKid) as Buffer;
    const iv = randomBytes(12);
    const cipher = createCipheriv("aes-256-gcm", key, iv);
    const ct = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final()]);
    const b = (x: Buffer) => x.toString("base64url");
    return `v1.${this.currentKid}.${b(iv)}.${b(cipher.getAuthTag())}.${b(ct)}`;
  }

  decrypt(stored: string): string {
    const [version, kid, iv, tag, ct] = stored.split(".");
    if (version !== "v1" || !kid || iv === undefined || tag === undefined || ct === undefined)
      throw new Error("unrecognised credential format");
    const key = this.keys.get(kid);
    if (!key)
      throw new Error(
        `credential was encrypted with a secret that is not configured (key id ${kid}); add it to VIGIL_PREVIOUS_SECRETS`,
      );
    const decipher = createDecipheriv("aes-256-gcm", key, Buffer.from(iv, "base64url"));
    decipher.setAuthTag(Buffer.from(tag, "base64url"));
    return Buffer.concat([decipher.update(Buffer.from(ct, "base64url")), decipher.final()]).toString("utf8");
  }

  kidOf(stored: string): string | undefined {
    return stored.split(".")[1];
  }
}
