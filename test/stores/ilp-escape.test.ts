import { Sender } from "@questdb/nodejs-client";
import t from "tap";
import { installFastEscape } from "../../src/stores/series/ilp-escape.js";

// Encodes rows into a sender's buffer (no server involved) and returns the bytes.
async function encode(sender: Sender, values: string[]): Promise<Buffer> {
  sender.reset();
  for (const v of values) {
    await sender
      .table(`t_${values.indexOf(v)}`)
      .symbol("sym", v)
      .stringColumn("str", v)
      .intColumn("n", 1)
      .at(1_700_000_000_000, "ms");
  }
  return Buffer.from((sender as unknown as { buffer: { toBufferView(): Buffer } }).buffer.toBufferView());
}

t.test("the fast escape path writes exactly the bytes the client would", async (t) => {
  const values = [
    "plain",
    "8b1f5f9e-0c3a-4d6f-9a57-2f0e6c1d1a11",
    "with space",
    "a,b=c",
    'quote " inside',
    "back\\slash",
    "new\nline\rreturn",
    "unicode ✓ ünï",
    '{"gatewayPidAlive":true,"load":[0.5, 1]}',
    "",
  ];
  const sender = await Sender.fromConfig("http::addr=127.0.0.1:1;auto_flush=off;protocol_version=2;");
  const original = installFastEscape(sender);
  t.ok(original, "installed");
  const fast = await encode(sender, values);
  // the same rows with the client's own per-character escaping
  const proto = Object.getPrototypeOf((sender as unknown as { buffer: object }).buffer);
  let owner = proto;
  while (owner && !Object.hasOwn(owner, "writeEscaped")) owner = Object.getPrototypeOf(owner);
  const patched = owner.writeEscaped;
  owner.writeEscaped = original;
  const slow = await encode(sender, values);
  owner.writeEscaped = patched;
  t.equal(fast.toString("utf8"), slow.toString("utf8"));
  t.ok(fast.equals(slow), "byte-identical");
  t.match(slow.toString("utf8"), /sym=with\\ space/, "escaping still applies where needed");
  t.equal(installFastEscape(sender), original, "installing twice keeps the original");
  await sender.close();
});
