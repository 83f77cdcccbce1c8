import { allChannelCiphertexts, replaceChannelCiphertexts } from "../channels/repository.js";
import { connectionsWithCredentials, replaceCiphertexts } from "../connections/repository.js";
import type { CredentialBox } from "../lib/credentials.js";
import type { RelationalStore } from "../stores/relational/types.js";
import { allWebhookCiphertexts, replaceWebhookCiphertexts } from "../webhooks/repository.js";

/**
 * Rewrites every stored credential that is not under the current master secret: connections'
 * API keys and tokens, webhooks' URLs and signing secrets, and notification channels' secret
 * settings and signing secrets. Run after setting a new VIGIL_SECRET with the old one in
 * VIGIL_PREVIOUS_SECRETS; afterwards the old secret can be dropped. `checked` and `reencrypted`
 * count connections, webhooks and channels together.
 */
export async function reencryptCredentials(db: RelationalStore, box: CredentialBox) {
  const again = (v: string | null) =>
    v && box.kidOf(v) !== box.currentKid ? box.encrypt(box.decrypt(v)) : v;
  const rows = await connectionsWithCredentials(db);
  let updated = 0;
  for (const r of rows) {
    const key = again(r.api_key_enc);
    const token = again(r.api_token_enc);
    if (key !== r.api_key_enc || token !== r.api_token_enc) {
      await replaceCiphertexts(db, { id: r.id, api_key_enc: key, api_token_enc: token });
      updated++;
    }
  }
  const hooks = await allWebhookCiphertexts(db);
  for (const w of hooks) {
    const url = again(w.url_enc) ?? w.url_enc;
    const secret = again(w.secret_enc) ?? w.secret_enc;
    if (url !== w.url_enc || secret !== w.secret_enc) {
      await replaceWebhookCiphertexts(db, { id: w.id, url_enc: url, secret_enc: secret });
      updated++;
    }
  }
  const channels = await allChannelCiphertexts(db);
  for (const c of channels) {
    const secrets = again(c.secrets_enc);
    const signing = again(c.signing_secret_enc);
    if (secrets !== c.secrets_enc || signing !== c.signing_secret_enc) {
      await replaceChannelCiphertexts(db, { id: c.id, secrets_enc: secrets, signing_secret_enc: signing });
      updated++;
    }
  }
  return { reencrypted: updated, checked: rows.length + hooks.length + channels.length };
}
