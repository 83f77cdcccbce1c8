import { Sender } from "@questdb/nodejs-client";
import t from "tap";
import { escapeTag, lineEncoder, quoteString } from "../../src/stores/series/ilp.js";
import { type ColumnType, seriesTables } from "../../src/stores/series/tables.js";

const awkward = [
  "plain",
  "8b1f5f9e-0c3a-4d6f-9a57-2f0e6c1d1a11",
  "with space",
  "a,b=c",
  'quote " inside',
  "back\\slash\\",
  "new\nline\rreturn",
  "unicode ✓ ünï 日本",
  '{"gatewayPidAlive":true,"load":[0.5, 1]}',
  "",
];

/** The same row through @questdb/nodejs-client's text protocol (v1), no server involved. */
async function clientBytes(
  sender: Sender,
  name: string,
  columns: Record<string, { type: ColumnType }>,
  row: Record<string, unknown>,
) {
  sender.reset();
  sender.table(name);
  for (const [c, d] of Object.entries(columns))
    if (d.type === "symbol" && row[c] != null) sender.symbol(c, row[c]);
  for (const [c, d] of Object.entries(columns)) {
    const v = row[c];
    if (v == null || d.type === "symbol") continue;
    if (d.type === "string") sender.stringColumn(c, v as string);
    else if (d.type === "boolean") sender.booleanColumn(c, v as boolean);
    else if (d.type === "double") sender.floatColumn(c, v as number);
    else if (d.type === "long") sender.intColumn(c, v as number);
    else sender.timestampColumn(c, (v as Date).getTime(), "ms");
  }
  await sender.at((row.ts as Date).getTime(), "ms");
  return Buffer.from((sender as unknown as { buffer: { toBufferView(): Buffer } }).buffer.toBufferView());
}

/** A row for a table with every column set; text columns take `text`, numbers vary. */
function rowFor(columns: Record<string, { type: ColumnType }>, text: string, i: number) {
  const row: Record<string, unknown> = { ts: new Date(1_700_000_000_000 + i) };
  for (const [c, d] of Object.entries(columns)) {
    if (d.type === "symbol" || d.type === "string") row[c] = text;
    else if (d.type === "boolean") row[c] = i % 2 === 0;
    else if (d.type === "double") row[c] = [0, 1.5, 812.25, 1e-7, 123456789.125, 1e21][i % 6];
    else if (d.type === "long") row[c] = [0, 42, -7, 9_007_199_254_740_991][i % 4];
    else row[c] = new Date(1_700_000_123_456 + i);
  }
  return row;
}

t.test("lines are byte-identical to the QuestDB client's text protocol", async (t) => {
  const sender = await Sender.fromConfig("http::addr=127.0.0.1:1;auto_flush=off;protocol_version=1;");
  let i = 0;
  for (const table of Object.values(seriesTables)) {
    const encode = lineEncoder(`p_${table.name}`, table);
    for (const text of awkward) {
      const row = rowFor(table.columns, text, i++);
      const expected = await clientBytes(sender, `p_${table.name}`, table.columns, row);
      t.equal(encode(row), expected.toString("utf8"), `${table.name} with ${JSON.stringify(text)}`);
    }
    // nullable columns left out, as the client leaves them out
    const sparse = rowFor(table.columns, "x", i++);
    for (const [c, d] of Object.entries(table.columns))
      if ((d as { nullable?: boolean }).nullable) sparse[c] = null;
    const expected = await clientBytes(sender, `p_${table.name}`, table.columns, sparse);
    t.equal(encode(sparse), expected.toString("utf8"), `${table.name} with nulls`);
  }
  await sender.close();
});

t.test("escaping", async (t) => {
  t.equal(escapeTag("a b,c=d\\e\nf"), "a\\ b\\,c\\=d\\\\e\\\nf");
  t.equal(escapeTag("nothing-to-do"), "nothing-to-do");
  t.equal(quoteString('say "hi", a=b\\'), '"say \\"hi\\", a=b\\\\"');
  t.equal(quoteString(""), '""');
});
