/** Plain-text tables and progress for benchmark output. */

export const fmt = (n: number, digits = 0) =>
  Number.isFinite(n)
    ? n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits })
    : "n/a";

export function table(headers: string[], rows: (string | number)[][]): string {
  const cells = [headers, ...rows.map((r) => r.map(String))];
  const widths = headers.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? "").length)));
  const line = (r: string[]) =>
    r.map((c, i) => (i === 0 ? c.padEnd(widths[i] ?? 0) : c.padStart(widths[i] ?? 0))).join("  ");
  return [line(headers), widths.map((w) => "-".repeat(w)).join("  "), ...cells.slice(1).map(line)].join("\n");
}

export function progress(label: string): (done: number, total: number) => void {
  let last = 0;
  return (done, total) => {
    const now = Date.now();
    if (done < total && now - last < 1000) return;
    last = now;
    process.stderr.write(
      `\r${label}: ${fmt((done / total) * 100)}% (${fmt(done)}/${fmt(total)})${done >= total ? "\n" : ""}`,
    );
  };
}

export function verdict(ratio: number, target: number): string {
  return ratio >= target ? `meets target >= ${target}` : `BELOW target >= ${target}`;
}
