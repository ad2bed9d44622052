// The benchmark's charts (bench/charts.mjs, drawn by `npm run bench` into docs/): each is a
// well-formed standalone SVG, its marks are proportional to the figures, and text from the results
// is escaped. Pure functions on a small results object: no benchmark runs here.
import { describe, expect, it } from "vitest";
import {
  charts,
  escapeXml,
  formatBytes,
  formatNumber,
  type HttpResults,
  httpChart,
  type MicroResults,
  verifyChart,
} from "../../bench/charts.mjs";

// ------------------------------------------------------------------ a strict XML 1.0 reader

interface Element {
  name: string;
  attributes: Record<string, string>;
  children: Element[];
  text: string;
}

const NAME = /^[A-Za-z_:][\w.:-]*/;
const ENTITIES: Record<string, string> = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'" };

/** Character data with its references decoded; throws on a bare `&` or an unknown entity. */
function decode(raw: string, where: string): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: XML 1.0 forbids exactly these.
  if (/[\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]/.test(raw))
    throw new Error(`${where}: forbidden character`);
  return raw.replace(/&([^;&\s]*);?/g, (whole, ref: string) => {
    if (!whole.endsWith(";")) throw new Error(`${where}: bare & in ${JSON.stringify(raw)}`);
    if (ref in ENTITIES) return ENTITIES[ref] as string;
    const numeric = /^#(?:x([0-9a-fA-F]+)|([0-9]+))$/.exec(ref);
    if (numeric) return String.fromCodePoint(Number.parseInt(numeric[1] ?? numeric[2] ?? "", numeric[1] ? 16 : 10));
    throw new Error(`${where}: unknown entity &${ref};`);
  });
}

/**
 * Parses a document the way a strict XML parser would refuse it: one root element, every tag
 * closed in order, attributes quoted and unique, no raw `<` or bare `&` in text or attributes.
 * Only what SVG output needs: an XML declaration, elements, text, comments.
 */
function parseXml(source: string): Element {
  let at = 0;
  const fail = (message: string): never => {
    throw new Error(`XML error at ${at}: ${message}: ${JSON.stringify(source.slice(at, at + 60))}`);
  };
  const skipSpace = () => {
    while (/\s/.test(source[at] ?? "")) at++;
  };
  if (source.startsWith("<?xml")) {
    const end = source.indexOf("?>");
    if (end < 0) fail("unclosed declaration");
    if (!/^<\?xml version="1\.[0-9]"( encoding="[A-Za-z0-9._-]+")?\s*\?>$/.test(source.slice(0, end + 2)))
      fail("bad declaration");
    at = end + 2;
  }
  const skipMisc = () => {
    for (;;) {
      skipSpace();
      if (source.startsWith("<!--", at)) {
        const end = source.indexOf("-->", at + 4);
        if (end < 0) fail("unclosed comment");
        if (source.slice(at + 4, end).includes("--")) fail("-- inside a comment");
        at = end + 3;
      } else return;
    }
  };
  const element = (): Element => {
    if (source[at] !== "<") fail("expected <");
    at++;
    const name = NAME.exec(source.slice(at))?.[0] ?? fail("bad tag name");
    at += name.length;
    const node: Element = { name, attributes: {}, children: [], text: "" };
    for (;;) {
      const before = at;
      skipSpace();
      if (source.startsWith("/>", at)) {
        at += 2;
        return node;
      }
      if (source[at] === ">") {
        at++;
        break;
      }
      if (before === at) fail("attributes must be separated by space");
      const attribute = NAME.exec(source.slice(at))?.[0] ?? fail("bad attribute name");
      at += attribute.length;
      if (source[at] !== "=") fail("attribute without =");
      at++;
      const quote = source[at];
      if (quote !== '"' && quote !== "'") fail("unquoted attribute value");
      const end = source.indexOf(quote as string, at + 1);
      if (end < 0) fail("unclosed attribute value");
      const raw = source.slice(at + 1, end);
      if (raw.includes("<")) fail("< in an attribute value");
      if (attribute in node.attributes) fail(`duplicate attribute ${attribute}`);
      node.attributes[attribute] = decode(raw, `${name}@${attribute}`);
      at = end + 1;
    }
    for (;;) {
      const next = source.indexOf("<", at);
      if (next < 0) fail(`unclosed <${name}>`);
      const raw = source.slice(at, next);
      if (raw.includes("]]>")) fail("]]> in text");
      node.text += decode(raw, name);
      at = next;
      if (source.startsWith("</", at)) {
        at += 2;
        const closing = NAME.exec(source.slice(at))?.[0];
        if (closing !== name) fail(`</${closing}> closes <${name}>`);
        at += name.length;
        skipSpace();
        if (source[at] !== ">") fail("bad end tag");
        at++;
        return node;
      }
      if (source.startsWith("<!--", at)) {
        skipMisc();
        continue;
      }
      node.children.push(element());
    }
  };
  skipMisc();
  const root = element();
  skipMisc();
  if (at !== source.length) fail("content after the root element");
  return root;
}

function all(node: Element, test: (e: Element) => boolean, found: Element[] = []): Element[] {
  if (test(node)) found.push(node);
  for (const child of node.children) all(child, test, found);
  return found;
}

/** All text of an element and its descendants, decoded. */
function textOf(node: Element): string {
  return node.text + node.children.map(textOf).join("");
}

/** The (x, y) points of a path made of M and L commands. */
function pathPoints(d: string): [number, number][] {
  return [...d.matchAll(/[ML](-?[\d.]+),(-?[\d.]+)/g)].map((m) => [Number(m[1]), Number(m[2])]);
}

// ---------------------------------------------------------------------------- the fixtures

const SIZES = [256, 4096, 65536, 1048576];

/** A micro result: `perByte` ns per byte on top of `base` ns, the same in every round. */
function series(id: string, label: string, base: number, perByte: number) {
  return {
    id,
    label,
    results: SIZES.map((size) => {
      const medianNs = base + perByte * size;
      return { size, medianNs, minNs: medianNs * 0.9, maxNs: medianNs * 1.2 };
    }),
  };
}

const micro: MicroResults = {
  part: "micro",
  date: "2026-11-23T12:16:48.697Z",
  machine: "Node v20.20.2, Linux, 2 × Test CPU",
  quick: false,
  rounds: 12,
  cases: [
    series("ours-node", "flag-webhooks", 5000, 0.9),
    series("limit", "node:crypto limit", 5200, 0.9),
    series("octokit", "@octokit/webhooks-methods", 5500, 2.2),
    series("stripe", "stripe", 8000, 3.5),
    series("svix", "svix", 20000, 20),
    series("ours-web", "not drawn by default", 90000, 1.5),
  ],
};

const http: HttpResults = {
  part: "http",
  date: "2026-11-23T12:20:00.000Z",
  machine: "Node v20.20.2, Linux, 2 × Test CPU",
  quick: false,
  bodySize: 2048,
  connections: 50,
  rounds: 5,
  durationS: 5,
  cases: [
    {
      id: "bare-node",
      label: "bare node:http",
      rps: { median: 12000, min: 11000, max: 13000 },
      cpuUsPerReq: { median: 80, min: 78, max: 83 },
    },
    {
      id: "ours-node",
      label: "ours on node:http",
      ours: true,
      rps: { median: 9000, min: 8500, max: 9900 },
      cpuUsPerReq: { median: 100, min: 96, max: 104 },
    },
    {
      id: "octokit",
      label: "@octokit/webhooks",
      rps: { median: 6000, min: 5000, max: 6500 },
      cpuUsPerReq: { median: 160, min: 150, max: 170 },
    },
  ],
};

// ------------------------------------------------------------------------------------ tests

describe("bench/charts.mjs: verify time against body size", () => {
  const svg = verifyChart(micro);
  const root = parseXml(svg);

  it("is a well-formed standalone SVG with a white background, a title, axes with units and a legend", () => {
    expect(root.name).toBe("svg");
    expect(root.attributes.xmlns).toBe("http://www.w3.org/2000/svg");
    expect(Number(root.attributes.width)).toBeGreaterThan(0);
    const background = root.children.find((e) => e.name === "rect");
    expect(background?.attributes.fill).toBe("#ffffff");
    expect(background?.attributes.width).toBe(root.attributes.width);
    expect(root.children.find((e) => e.name === "title")?.text).toMatch(/time per call against body size/);
    const words = textOf(root);
    expect(words).toContain("µs per call (log scale)");
    expect(words).toContain("body size (log scale)");
    for (const label of [
      "flag-webhooks",
      "hand-written node:crypto check",
      "@octokit/webhooks-methods",
      "stripe",
      "svix",
    ]) {
      expect(words).toContain(label);
    }
    // The baseline is named for what it measures, whatever label the results carry: one that a
    // library can beat is no limit.
    expect(words).not.toContain("node:crypto limit");
    for (const size of ["256 B", "4 KiB", "64 KiB", "1 MiB"]) expect(words).toContain(size);
    expect(words).toContain("Node v20.20.2, Linux, 2 × Test CPU");
    expect(words).toContain("2026-11-23 12:16 UTC");
    expect(words).not.toContain("not drawn by default"); // only the comparison series by default
    // The table of ratios to the baseline under the plot: (5000 + 0.9 × 256) ÷ (5200 + 0.9 × 256)
    // at 256 B for ours, (20000 + 20 × 1 MiB) ÷ (5200 + 0.9 × 1 MiB) at 1 MiB for svix.
    expect(words).toContain("median ÷ hand-written node:crypto check");
    const ratios = all(root, (e) => e.name === "text").map((e) => e.text);
    expect(ratios).toContain("0.96×");
    expect(ratios).toContain("22.1×");
    expect(words).not.toContain("BENCH_QUICK");
  });

  it("draws a longer time higher, at the same size and across sizes, equal ratios at equal distances (log)", () => {
    const line = (id: string) => {
      const group = all(root, (e) => e.name === "g" && e.attributes["data-series"] === id)[0];
      const path = group?.children.find((e) => e.name === "path");
      return pathPoints(path?.attributes.d ?? "");
    };
    const ours = line("ours-node");
    const svix = line("svix");
    expect(ours).toHaveLength(4);
    expect(svix).toHaveLength(4);
    for (let i = 0; i < 4; i++) {
      const [oursX, oursY] = ours[i] as [number, number];
      const [svixX, svixY] = svix[i] as [number, number];
      expect(oursX).toBe(svixX);
      expect(svixY).toBeLessThan(oursY); // svix is slower: its point is higher (SVG y grows downwards)
      if (i > 0) expect(oursY).toBeLessThan((ours[i - 1] as [number, number])[1]); // bigger body, more time
    }
    // Log y: the distance between two points is proportional to the log of their ratio.
    const heightOf = (ns: number) => -Math.log10(ns);
    const values = micro.cases[0]?.results.map((p) => p.medianNs) ?? [];
    const pixelsPerDecade =
      ((ours[0]?.[1] ?? 0) - (ours[3]?.[1] ?? 0)) / (heightOf(values[0] ?? 1) - heightOf(values[3] ?? 1));
    const predicted = (ours[0]?.[1] ?? 0) - pixelsPerDecade * (heightOf(values[0] ?? 1) - heightOf(values[2] ?? 1));
    expect(ours[2]?.[1]).toBeCloseTo(predicted, 0);
  });

  it("uses linear axes when the figures span little, with heights proportional to the time", () => {
    const narrow: MicroResults = {
      ...micro,
      cases: [
        {
          id: "ours-node",
          results: [
            { size: 1000, medianNs: 1000 },
            { size: 2000, medianNs: 2000 },
            { size: 3000, medianNs: 4000 },
          ],
        },
      ],
    };
    const tree = parseXml(verifyChart(narrow));
    expect(textOf(tree)).toContain("µs per call");
    expect(textOf(tree)).not.toContain("log scale");
    const d = all(
      tree,
      (e) => e.name === "path" && e.attributes.fill === "none" && e.attributes.d?.startsWith("M") === true,
    );
    const points = pathPoints(d.find((e) => pathPoints(e.attributes.d ?? "").length === 3)?.attributes.d ?? "");
    const [a, b, c] = points.map(([, y]) => y) as [number, number, number];
    // y = bottom − k·t: the step from 1 to 2 µs is half the step from 2 to 4 µs.
    expect((a - b) / (b - c)).toBeCloseTo(1000 / 2000, 2);
    // x is linear in the size too: equal size steps, equal distances.
    const [x1, x2, x3] = points.map(([x]) => x) as [number, number, number];
    expect(x2 - x1).toBeCloseTo(x3 - x2, 1);
  });

  it("refuses results with none of the series, rather than drawing an empty chart", () => {
    expect(() => verifyChart({ ...micro, cases: [] })).toThrow(/none of the series/);
  });
});

describe("bench/charts.mjs: requests per second and CPU per request", () => {
  const svg = httpChart(http);
  const root = parseXml(svg);

  it("is a well-formed SVG with both panels, units, the receivers, the machine and the conditions", () => {
    expect(root.name).toBe("svg");
    expect(root.children.find((e) => e.name === "rect")?.attributes.fill).toBe("#ffffff");
    const words = textOf(root);
    for (const label of ["bare node:http", "ours on node:http", "@octokit/webhooks"]) expect(words).toContain(label);
    expect(words).toContain("requests per second");
    expect(words).toContain("server CPU per request, µs");
    expect(words).toContain("req/s");
    expect(words).toContain("50 connections, 5 rounds of 5 s");
    expect(words).toContain("Test CPU");
    expect(words).toContain("0.75×"); // ours ÷ bare req/s, printed beside the bar
    expect(words).toContain("1.25×"); // ours ÷ bare CPU per request
  });

  it("draws each bar's length proportional to its median, in both panels", () => {
    for (const panel of ["rps", "cpuUsPerReq"] as const) {
      const group = all(root, (e) => e.attributes["data-panel"] === panel)[0];
      const bars = group?.children.filter((e) => e.name === "rect") ?? [];
      expect(bars).toHaveLength(3);
      const widthPerUnit = bars.map((bar) => {
        const value = http.cases.find((k) => k.id === bar.attributes["data-case"])?.[panel].median ?? Number.NaN;
        return Number(bar.attributes.width) / value;
      });
      for (const ratio of widthPerUnit) expect(ratio).toBeCloseTo(widthPerUnit[0] as number, 3);
      const widths = bars.map((bar) => Number(bar.attributes.width));
      // bare 12,000 > ours 9,000 > octokit 6,000 req/s; CPU the other way round.
      if (panel === "rps") expect(widths[0]).toBeGreaterThan(widths[1] as number);
      else expect(widths[2]).toBeGreaterThan(widths[1] as number);
      // All bars start at the same x: the zero of the axis.
      expect(new Set(bars.map((bar) => bar.attributes.x)).size).toBe(1);
    }
  });
});

describe("bench/charts.mjs: text from the results", () => {
  const hostile = `<script>alert("x")</script> & 'quotes' \u0001`;

  it("escapes labels, the machine string and the date; the SVG still parses and shows the text as written", () => {
    const verify = verifyChart({
      ...micro,
      machine: hostile,
      date: "not a date <b>",
      cases: micro.cases.map((k) => (k.id === "stripe" ? { ...k, label: hostile } : k)),
    });
    const tree = parseXml(verify);
    expect(verify).not.toContain("<script>");
    expect(textOf(tree)).toContain(`<script>alert("x")</script> & 'quotes' `);
    expect(textOf(tree)).toContain("not a date <b>");
    expect(textOf(tree)).not.toContain("\u0001"); // forbidden in XML 1.0, dropped

    const bars = httpChart({
      ...http,
      machine: hostile,
      cases: http.cases.map((k) => (k.id === "octokit" ? { ...k, id: `"><x y="`, label: hostile } : k)),
    });
    const barTree = parseXml(bars);
    expect(bars).not.toContain("<script>");
    expect(all(barTree, (e) => e.attributes["data-case"] === `"><x y="`)).toHaveLength(2);
    expect(all(barTree, (e) => e.name === "x")).toHaveLength(0);
  });

  it("escapeXml escapes the five special characters and drops what XML cannot carry", () => {
    expect(escapeXml(`a<b>&"c'`)).toBe("a&lt;b&gt;&amp;&quot;c&apos;");
    expect(escapeXml("ok\u0000\u001f\ud800 µ ×")).toBe("ok µ ×");
  });

  it("formats numbers and sizes without depending on the locale", () => {
    expect(formatNumber(1234567.8)).toBe("1,234,568");
    expect(formatNumber(12.345)).toBe("12.3");
    expect(formatNumber(0.456)).toBe("0.46");
    expect(formatNumber(Number.NaN)).toBe("n/a");
    expect(formatBytes(256)).toBe("256 B");
    expect(formatBytes(65536)).toBe("64 KiB");
    expect(formatBytes(1048576)).toBe("1 MiB");
  });
});

describe("bench/charts.mjs: charts()", () => {
  it("draws one file per part present, the same bytes for the same results, and marks a smoke run", () => {
    const files = charts({ micro, http });
    expect(Object.keys(files).sort()).toEqual(["bench-http.svg", "bench-verify.svg"]);
    expect(charts({ micro, http })).toEqual(files);
    expect(Object.keys(charts({ http }))).toEqual(["bench-http.svg"]);
    const quick = charts({ micro: { ...micro, quick: true }, http: { ...http, quick: true } });
    for (const svg of Object.values(quick)) {
      expect(textOf(parseXml(svg))).toContain("BENCH_QUICK smoke run: figures NOT for publication");
    }
    for (const svg of Object.values(files)) expect(svg).not.toContain("BENCH_QUICK");
  });
});
