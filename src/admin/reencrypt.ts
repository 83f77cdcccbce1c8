import type { CredentialBox } from "../lib/credentials.js";
import type { RelationalStore } from "../stores/relational/types.js";

/**
 * Rewrites every stored credential that is not under the current master secret. Run after
 * setting a new VIGIL_SECRET with the old one in VIGIL_PREVIOUS_SECRETS; afterwards the old
 * secret can be dropped.
 */
export async function reencryptCredentials(db: RelationalStore, box: CredentialBox) {
  const rows = await db.query<{ id: string; api_key_enc: string | null; api_token_enc: string | null }>(
    "SELECT id, api_key_enc, api_token_enc FROM connections WHERE api_key_enc IS NOT NULL OR api_token_enc IS NOT NULL",
  );
  let updated = 0;
  for (const r of rows.rows) {
    const again = (v: string | null) =>
      v && box.kidOf(v) !== box.currentKid ? box.encrypt(box.decrypt(v)) : v;
    const key = again(r.api_key_enc);
    const token = again(r.api_token_enc);
    if (key !== r.api_key_enc || token !== r.api_token_enc) {
      await db.query("UPDATE connections SET api_key_enc = $2, api_token_enc = $3 WHERE id = $1", [
        r.id,
        key,
        token,
      ]);
      updated++;
    }
  }
  return { reencrypted: updated, checked: rows.rows.length };
}
