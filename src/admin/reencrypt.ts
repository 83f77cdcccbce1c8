import { connectionsWithCredentials, replaceCiphertexts } from "../connections/repository.js";
import type { CredentialBox } from "../lib/credentials.js";
import type { RelationalStore } from "../stores/relational/types.js";

/**
 * Rewrites every stored credential that is not under the current master secret. Run after
 * setting a new VIGIL_SECRET with the old one in VIGIL_PREVIOUS_SECRETS; afterwards the old
 * secret can be dropped.
 */
export async function reencryptCredentials(db: RelationalStore, box: CredentialBox) {
  const rows = await connectionsWithCredentials(db);
  let updated = 0;
  for (const r of rows) {
    const again = (v: string | null) =>
      v && box.kidOf(v) !== box.currentKid ? box.encrypt(box.decrypt(v)) : v;
    const key = again(r.api_key_enc);
    const token = again(r.api_token_enc);
    if (key !== r.api_key_enc || token !== r.api_token_enc) {
      await replaceCiphertexts(db, { id: r.id, api_key_enc: key, api_token_enc: token });
      updated++;
    }
  }
  return { reencrypted: updated, checked: rows.length };
}
