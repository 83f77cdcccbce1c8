import client from "prom-client";

/**
 * Prometheus's text format (0.0.4) for a prom-client registry: the same text as
 * `registry.metrics()`, byte for byte (test/metrics/metrics-text.test.ts), at a fraction of its
 * cost (`npm run bench -- metrics`; issue #33: a scrape under 5 ms).
 *
 * prom-client builds each line from label objects on every scrape and joins the families' texts
 * into one string. With ~2,000 lines most of a scrape went to formatting the same labels again
 * and to flattening that string. Here a label set's text is kept with the label object prom-client
 * holds it in (the same object scrape after scrape, forgotten with it), and the lines are joined
 * once. Metrics and their values still come from prom-client (`get`), so collectors, histograms
 * and the default process metrics behave as before.
 */

/** A value of a metric as prom-client gives it for the text format. */
interface Value {
  value: number;
  labels?: Record<string, string | number>;
  /** A histogram's labels shared by its bucket, sum and count lines (`labels` holds `le`). */
  sharedLabels?: Record<string, string | number>;
  metricName?: string;
}

interface Family {
  name: string;
  help: string;
  type: string;
  values?: Value[];
}

/** prom-client's histograms (and summaries) give their values unsplayed through this method. */
interface ForPromString {
  getForPromString(): Promise<Family> | Family;
}

/** A label set's `name="value",…` text, by the object prom-client keeps it in. */
const labelTexts = new WeakMap<object, string>();
const EMPTY = "";

function labelText(labels: Record<string, string | number> | undefined): string {
  if (!labels) return EMPTY;
  let text = labelTexts.get(labels);
  if (text === undefined) {
    text = Object.entries(labels)
      .map(([name, value]) => `${name}="${escapeLabelValue(value)}"`)
      .join(",");
    labelTexts.set(labels, text);
  }
  return text;
}

/** A histogram bucket's own label: `le="0.005"` by its upper bound (a handful per histogram). */
const leTexts = new Map<string | number, string>();

function ownLabelText(
  labels: Record<string, string | number>,
  shared: Record<string, string | number>,
): string {
  const keys = Object.keys(labels);
  if (keys.length === 0) return EMPTY;
  if (keys.length === 1 && keys[0] === "le") {
    const bound = labels.le as string | number;
    let text = leTexts.get(bound);
    if (text === undefined) {
      text = `le="${escapeLabelValue(bound)}"`;
      leTexts.set(bound, text);
    }
    return text;
  }
  // anything else: formatted as prom-client does, leaving out what the shared labels name
  return keys
    .filter((name) => !Object.hasOwn(shared, name))
    .map((name) => `${name}="${escapeLabelValue(labels[name] as string | number)}"`)
    .join(",");
}

function escapeString(text: string): string {
  return text.replace(/\\/g, "\\\\").replace(/\n/g, "\\n");
}

function escapeLabelValue(value: string | number): string | number {
  return typeof value === "string" ? escapeString(value).replace(/"/g, '\\"') : value;
}

function valueText(value: number): string {
  if (Number.isNaN(value)) return "Nan"; // sic: prom-client's spelling, kept so the text is the same
  if (!Number.isFinite(value)) return value < 0 ? "-Inf" : "+Inf";
  return `${value}`;
}

/** Text is handed over in pieces of about this many characters (see `exposition`). */
const PIECE = 16_384;

/** What a prom-client histogram holds (prom-client 15): read directly, its values unbuilt. */
interface HistogramState {
  name: string;
  help: string;
  type: string;
  upperBounds: number[];
  hashMap: Record<
    string,
    {
      labels: Record<string, string | number>;
      bucketValues: Record<number, number>;
      sum: number;
      count: number;
    }
  >;
  collect?: () => unknown;
}

function histogramState(metric: unknown): HistogramState | undefined {
  if (!(metric instanceof client.Histogram)) return undefined;
  const h = metric as unknown as Partial<HistogramState>;
  return typeof h.hashMap === "object" && h.hashMap !== null && Array.isArray(h.upperBounds)
    ? (h as HistogramState)
    : undefined;
}

/** A histogram's `le="…"` labels, by histogram: its bounds do not change. */
const boundTexts = new WeakMap<HistogramState, string[]>();

/**
 * The text format of every metric in `registry` (no default labels: Vigil sets none), encoded.
 *
 * Histograms are read from their counts as they are: prom-client would build an object for every
 * bucket of every label set on each scrape, most of a scrape's garbage. The text is built in
 * pieces of ~16 K characters, each encoded on its own, then copied into one buffer: a scrape's
 * ~300 KB as one string is a large heap object, and building and flattening it cost four times as
 * much as the whole rest of the text (measured on Node 20 and 24).
 */
export async function exposition(registry: client.Registry): Promise<Buffer> {
  const families = await Promise.all(
    registry.getMetricsAsArray().map(async (metric): Promise<Family | HistogramState> => {
      const histogram = histogramState(metric);
      if (histogram) {
        await histogram.collect?.();
        return histogram;
      }
      const m = metric as unknown as Partial<ForPromString> & { get(): Promise<Family> | Family };
      return typeof m.getForPromString === "function" ? m.getForPromString() : m.get();
    }),
  );
  if (families.length === 0) return Buffer.from("\n"); // as prom-client: one empty line
  const pieces: Buffer[] = [];
  let text = "";
  const flush = () => {
    if (text.length >= PIECE) {
      pieces.push(Buffer.from(text));
      text = "";
    }
  };
  let first = true;
  for (const family of families) {
    if (!first) text += "\n"; // a blank line between families, as prom-client writes them
    first = false;
    const name = escapeString(family.name);
    text += `# HELP ${name} ${escapeString(family.help)}\n# TYPE ${name} ${family.type}`;
    if ("upperBounds" in family) {
      let bounds = boundTexts.get(family);
      if (!bounds) {
        bounds = family.upperBounds.map((b) => `le="${b}"`);
        boundTexts.set(family, bounds);
      }
      for (const key in family.hashMap) {
        const data = family.hashMap[key] as HistogramState["hashMap"][string];
        const shared = labelText(data.labels);
        const tail = shared ? `,${shared}}` : "}";
        let acc = 0;
        for (let i = 0; i < bounds.length; i++) {
          acc += data.bucketValues[family.upperBounds[i] as number] as number;
          text += `\n${name}_bucket{${bounds[i]}${tail} ${valueText(acc)}`;
        }
        const own = shared ? `{${shared}}` : EMPTY;
        text += `\n${name}_bucket{le="+Inf"${tail} ${valueText(data.count)}\n${name}_sum${own} ${valueText(data.sum)}\n${name}_count${own} ${valueText(data.count)}`;
        flush();
      }
    } else {
      for (const v of family.values ?? []) {
        let labels: string;
        if (v.sharedLabels) {
          // a value split from its label set (le, quantile): its own labels first, then the set's
          const own = v.labels ? ownLabelText(v.labels, v.sharedLabels) : EMPTY;
          const shared = labelText(v.sharedLabels);
          labels = own && shared ? `{${own},${shared}}` : own || shared ? `{${own || shared}}` : EMPTY;
        } else {
          const own = labelText(v.labels);
          labels = own ? `{${own}}` : EMPTY;
        }
        text += `\n${v.metricName ?? name}${labels} ${valueText(v.value)}`;
        flush();
      }
    }
    text += "\n";
  }
  pieces.push(Buffer.from(text));
  return Buffer.concat(pieces);
}

/** How prom-client's cluster aggregator combines one metric's values across processes. */
export type Aggregator = "sum" | "first" | "min" | "max" | "average" | "omit";

function parseValue(text: string): number {
  if (text === "+Inf") return Number.POSITIVE_INFINITY;
  if (text === "-Inf") return Number.NEGATIVE_INFINITY;
  if (text === "Nan" || text === "NaN") return Number.NaN;
  return Number(text);
}

function aggregate(how: Aggregator, values: number[]): number {
  switch (how) {
    case "first":
      return values[0] as number;
    case "min":
      return values.reduce((a, b) => Math.min(a, b), Number.POSITIVE_INFINITY);
    case "max":
      return values.reduce((a, b) => Math.max(a, b), Number.NEGATIVE_INFINITY);
    case "average":
      return values.reduce((a, b) => a + b, 0) / values.length;
    default:
      return values.reduce((a, b) => a + b, 0);
  }
}

/**
 * Several processes' texts (`exposition`'s, as `vigil serve --workers N`'s workers send them)
 * as one: each sample (a name with its label set) combined across the texts as prom-client's
 * cluster aggregator does, by its family's aggregator (`aggregatorOf`: sum unless it says
 * otherwise; "omit" leaves the family out). Families and samples keep the order they first
 * appear in. The same figures as prom-client's `AggregatorRegistry` over the same processes
 * (test/metrics/metrics-text.test.ts), without its objects: each worker sends its text, whose
 * lines the primary only splits and adds up.
 */
export function mergeExpositions(
  texts: readonly string[],
  aggregatorOf: (family: string) => Aggregator,
): Buffer {
  interface Merged {
    help: string;
    type: string;
    how: Aggregator;
    samples: Map<string, number[]>;
  }
  const families = new Map<string, Merged>();
  for (const text of texts) {
    let family: Merged | undefined;
    for (const line of text.split("\n")) {
      if (line === "") continue;
      if (line.startsWith("# HELP ")) {
        const space = line.indexOf(" ", 7);
        const name = space < 0 ? line.slice(7) : line.slice(7, space);
        family = families.get(name);
        if (!family) {
          family = { help: line, type: "", how: aggregatorOf(name), samples: new Map() };
          families.set(name, family);
        }
        continue;
      }
      if (line.startsWith("# TYPE ")) {
        if (family && !family.type) family.type = line;
        continue;
      }
      if (line.startsWith("#") || !family) continue;
      const space = line.lastIndexOf(" ");
      const sample = line.slice(0, space);
      const value = parseValue(line.slice(space + 1));
      const values = family.samples.get(sample);
      if (values) values.push(value);
      else family.samples.set(sample, [value]);
    }
  }
  const pieces: Buffer[] = [];
  let out = "";
  let first = true;
  for (const family of families.values()) {
    if (family.how === "omit") continue;
    if (!first) out += "\n";
    first = false;
    out += `${family.help}\n${family.type}\n`;
    for (const [sample, values] of family.samples) {
      out += `${sample} ${valueText(aggregate(family.how, values))}\n`;
      if (out.length >= PIECE) {
        pieces.push(Buffer.from(out));
        out = "";
      }
    }
  }
  pieces.push(Buffer.from(first ? "\n" : out));
  return Buffer.concat(pieces);
}
