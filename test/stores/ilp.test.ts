import { Sender } from "@questdb/nodejs-client";
import t from "tap";
import {
  escapeTag,
  IlpAuthError,
  IlpHttp,
  IlpRejectedError,
  lineEncoder,
  quoteString,
} from "../../src/stores/series/ilp.js";
import { type ColumnType, seriesTables } from "../../src/stores/series/tables.js";
import { AWKWARD_TEXT } from "../helpers/awkward-text.js";

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
    for (const text of AWKWARD_TEXT) {
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

t.test("answers are classified: 204 done, 401 credentials, 400 data, 503 retried", async (t) => {
  // A stand-in for QuestDB's HTTP answers only; the real server is covered by the series tests.
  const { createServer } = await import("node:http");
  const answers: number[] = [];
  let calls = 0;
  const server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      calls++;
      const status = answers.shift() ?? 204;
      res.writeHead(status, { "content-type": "application/json" });
      res.end(status === 204 ? undefined : JSON.stringify({ code: "x", message: `status ${status}` }));
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as { port: number }).port;
  const ilp = new IlpHttp({
    httpUrl: `http://u:p@127.0.0.1:${port}`,
    requestTimeoutMs: 2000,
    retryTimeoutMs: 500,
    connections: 1,
  });
  t.teardown(async () => {
    await ilp.close();
    server.close();
  });

  await ilp.write("t a=1i 1\n");
  t.equal(calls, 1, "204: one request");

  answers.push(401);
  await t.rejects(ilp.write("t a=1i 1\n"), IlpAuthError, "401 names the credentials");
  answers.push(400);
  await t.rejects(ilp.write("t a=1i 1\n"), IlpRejectedError, "400 is a data error");
  calls = 0;
  answers.push(503, 503);
  await ilp.write("t a=1i 1\n");
  t.equal(calls, 3, "503 is retried until it succeeds");
  answers.push(...Array(100).fill(503));
  await t.rejects(ilp.write("t a=1i 1\n"), /503/, "gives up after the retry timeout");
  answers.length = 0;
});
