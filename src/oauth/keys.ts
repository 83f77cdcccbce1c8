import { createHash, createPrivateKey, createPublicKey, hkdfSync, type KeyObject } from "node:crypto";
import { exportJWK, type JWK } from "jose";

/**
 * The keys that sign OAuth access tokens: Ed25519 key pairs derived (HKDF-SHA256) from the master
 * secret, so every node of a fleet sharing VIGIL_SECRET signs with the same key and nothing extra
 * is stored or backed up. The current secret's key signs; keys of VIGIL_PREVIOUS_SECRETS still
 * verify during a rotation. The key id is a hash of the public key.
 */
export interface SigningKey {
  kid: string;
  privateKey: KeyObject;
  publicKey: KeyObject;
}

/** PKCS#8 DER prefix of an Ed25519 private key; the 32-byte seed follows. */
const ED25519_PKCS8 = Buffer.from("302e020100300506032b657004220420", "hex");

export function deriveSigningKey(secret: string): SigningKey {
  const seed = Buffer.from(hkdfSync("sha256", secret, "vigil", "oauth access token signing v1", 32));
  const privateKey = createPrivateKey({
    key: Buffer.concat([ED25519_PKCS8, seed]),
    format: "der",
    type: "pkcs8",
  });
  const publicKey = createPublicKey(privateKey);
  const raw = publicKey.export({ format: "der", type: "spki" });
  const kid = createHash("sha256").update(raw).digest("base64url").slice(0, 16);
  return { kid, privateKey, publicKey };
}

export class KeyRing {
  readonly current: SigningKey;
  readonly all: SigningKey[];

  constructor(secrets: { current: string; previous: string[] }) {
    this.current = deriveSigningKey(secrets.current);
    this.all = [this.current, ...secrets.previous.map(deriveSigningKey)];
  }

  byKid(kid: string | undefined): SigningKey | undefined {
    return this.all.find((k) => k.kid === kid);
  }

  /** The JSON Web Key Set served at the JWKS endpoint. */
  async jwks(): Promise<{ keys: JWK[] }> {
    const keys = await Promise.all(
      this.all.map(async (k) => ({
        ...(await exportJWK(k.publicKey)),
        kid: k.kid,
        alg: "EdDSA",
        use: "sig",
      })),
    );
    return { keys };
  }
}
