// SVG charts of the benchmark results, drawn from the JSON that bench/micro.mjs and bench/http.mjs
// write (bench/run.mjs calls this after the parts and writes docs/bench-verify.svg and
// docs/bench-http.svg). A pure module: no dependencies, no I/O, no clock; the same results give
// byte-for-byte the same SVG. Plain ESM, Node >= 20. Types in charts.d.mts.
//
// Every chart is a standalone SVG 1.1 document with a white background (readable on GitHub's light
// and dark themes alike), a title, axis labels with units, a legend, the machine and date of the
// run, and a red banner when the results come from a BENCH_QUICK smoke run.

const FONT = "font-family=\"-apple-system, 'Segoe UI', Helvetica, Arial, sans-serif\"";
const INK = "#1f2328";
const MUTED = "#59636e";
const GRID = "#d1d9e0";
const OURS = "#0969da";
const WARN = "#cf222e";

/** The verify chart's series, in legend order: ours, the baseline, then the other libraries. */
export const VERIFY_SERIES = ["ours-node", "limit", "octokit", "stripe", "standardwebhooks", "svix"];

/**
 * What the baseline series (id "limit") measures: a verification written by hand with node:crypto
 * (createHmac, the hex check, timingSafeEqual), called synchronously. A library can be faster than
 * it (a cached key, a cheaper compare), so it is named for what it is, not as a limit, whatever
 * label the results it was measured in carry.
 */
export const BASELINE_LABEL = "hand-written node:crypto check";

/** The name a chart gives a series: the baseline's own, else the results' label. */
function seriesLabel(k) {
  return k.id === "limit" ? BASELINE_LABEL : (k.label ?? k.name ?? k.id);
}

// Okabe–Ito colours (distinguishable with the common colour-vision deficiencies) and dash
// patterns, so no two series differ by colour alone.
const STYLES = [
  { color: OURS, dash: "", width: 3.5 },
  { color: "#000000", dash: "6 4", width: 2 },
  { color: "#e69f00", dash: "", width: 2 },
  { color: "#009e73", dash: "2 3", width: 2 },
  { color: "#cc79a7", dash: "8 3 2 3", width: 2 },
  { color: "#d55e00", dash: "", width: 2 },
  { color: "#56b4e9", dash: "4 2", width: 2 },
  { color: "#999999", dash: "1 2", width: 2 },
];
const MARKERS = ["circle", "square", "diamond", "triangle", "circle", "square", "diamond", "triangle"];

// ------------------------------------------------------------------------------ text and numbers

/**
 * Text made safe for XML character data and attribute values: `& < > " '` escaped, and the
 * characters XML 1.0 forbids (C0 controls other than tab, LF, CR; lone surrogates; U+FFFE/U+FFFF)
 * dropped.
 */
export function escapeXml(value) {
  return String(value)
    .replace(/[^\t\n\r\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/gu, "")
    .replace(/&/g, "&amp;")
    .replace(/</g, "&lt;")
    .replace(/>/g, "&gt;")
    .replace(/"/g, "&quot;")
    .replace(/'/g, "&apos;");
}

/** A coordinate with at most two decimals and no trailing zeros: deterministic and compact. */
function c(value) {
  const rounded = Math.round(value * 100) / 100;
  return Object.is(rounded, -0) ? "0" : String(rounded);
}

/** 12345.6 → "12,346"; below 100 keeps one or two significant decimals. Locale-independent. */
export function formatNumber(value, digits) {
  if (!Number.isFinite(value)) return "n/a";
  const d = digits ?? (Math.abs(value) >= 100 ? 0 : Math.abs(value) >= 10 ? 1 : 2);
  const [whole, fraction] = Math.abs(value).toFixed(d).split(".");
  const grouped = whole.replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  return `${value < 0 ? "-" : ""}${grouped}${fraction ? `.${fraction}` : ""}`;
}

/** 256 → "256 B", 4096 → "4 KiB", 1048576 → "1 MiB". */
export function formatBytes(size) {
  if (size >= 1024 * 1024 && size % (1024 * 1024) === 0) return `${size / (1024 * 1024)} MiB`;
  if (size >= 1024 && size % 1024 === 0) return `${size / 1024} KiB`;
  return `${formatNumber(size, 0)} B`;
}

function text(x, y, content, attributes = "") {
  return `<text x="${c(x)}" y="${c(y)}"${attributes ? ` ${attributes}` : ""}>${escapeXml(content)}</text>`;
}

/** The date part of an ISO timestamp, with the time to the minute, in UTC. */
function runDate(iso) {
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return String(iso ?? "unknown date");
  return `${date.toISOString().slice(0, 16).replace("T", " ")} UTC`;
}

function document(width, height, title, description, body) {
  return [
    '<?xml version="1.0" encoding="UTF-8"?>',
    `<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" role="img" aria-labelledby="chart-title chart-desc">`,
    `<title id="chart-title">${escapeXml(title)}</title>`,
    `<desc id="chart-desc">${escapeXml(description)}</desc>`,
    `<rect x="0" y="0" width="${width}" height="${height}" fill="#ffffff"/>`,
    `<g ${FONT} fill="${INK}">`,
    ...body,
    "</g>",
    "</svg>",
    "",
  ].join("\n");
}

/** The title, the conditions under it, and the smoke-run banner; returns the lines and their height. */
function heading(width, title, subtitle, quick) {
  const lines = [
    text(24, 34, title, 'font-size="19" font-weight="600"'),
    text(24, 56, subtitle, `font-size="12.5" fill="${MUTED}"`),
  ];
  if (quick) {
    lines.push(
      `<rect x="24" y="66" width="${c(width - 48)}" height="24" rx="4" fill="#ffebe9" stroke="${WARN}"/>`,
      text(
        width / 2,
        83,
        "BENCH_QUICK smoke run: figures NOT for publication (rerun `npm run bench` on a quiet machine)",
        `font-size="13" font-weight="600" fill="${WARN}" text-anchor="middle"`,
      ),
    );
  }
  return { lines, bottom: quick ? 96 : 70 };
}

function footer(height, results) {
  return text(
    24,
    height - 14,
    `${results.machine ?? "unknown machine"} · run ${runDate(results.date)} · generated by bench/run.mjs (npm run bench)`,
    `font-size="11" fill="${MUTED}"`,
  );
}

function marker(shape, x, y, size, color, attributes) {
  const s = size;
  const common = `fill="${color}" stroke="#ffffff" stroke-width="1" ${attributes}`;
  if (shape === "square")
    return `<rect x="${c(x - s)}" y="${c(y - s)}" width="${c(2 * s)}" height="${c(2 * s)}" ${common}/>`;
  if (shape === "diamond") {
    const d = s * 1.3;
    return `<polygon points="${c(x)},${c(y - d)} ${c(x + d)},${c(y)} ${c(x)},${c(y + d)} ${c(x - d)},${c(y)}" ${common}/>`;
  }
  if (shape === "triangle") {
    const d = s * 1.3;
    return `<polygon points="${c(x)},${c(y - d)} ${c(x + d)},${c(y + d * 0.8)} ${c(x - d)},${c(y + d * 0.8)}" ${common}/>`;
  }
  return `<circle cx="${c(x)}" cy="${c(y)}" r="${c(s)}" ${common}/>`;
}

// ------------------------------------------------------------------------------------- scales

/** A linear or base-10 log scale from [lo, hi] onto [from, to]. */
function scale(lo, hi, from, to, log) {
  const f = log ? Math.log10 : (v) => v;
  const a = f(lo);
  const b = f(hi);
  const span = b - a || 1;
  return (value) => from + ((f(value) - a) / span) * (to - from);
}

/** Ticks of a log axis: each power of ten, and 2 and 5 times it when the axis spans few decades. */
function logTicks(lo, hi) {
  const ticks = [];
  const decades = Math.log10(hi / lo);
  const steps = decades <= 2.5 ? [1, 2, 5] : [1];
  for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) {
    for (const m of steps) {
      const v = m * 10 ** e;
      if (v >= lo * 0.999 && v <= hi * 1.001) ticks.push(Number(v.toPrecision(6)));
    }
  }
  return ticks;
}

/** A "nice" linear upper bound and its ticks: 0, step, 2 step, … ≥ max. */
function linearTicks(max, count = 5) {
  if (!(max > 0)) return { top: 1, ticks: [0, 1] };
  const raw = max / count;
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * magnitude).find((s) => s >= raw) ?? 10 * magnitude;
  const top = Math.ceil(max / step - 1e-9) * step;
  const ticks = [];
  for (let v = 0; v <= top + step / 2; v += step) ticks.push(Number(v.toPrecision(6)));
  return { top, ticks };
}

/** A tick label in µs: 0.5, 1, 20, 1,000. */
function tickLabel(value) {
  if (value >= 1) return formatNumber(value, 0);
  return String(Number(value.toPrecision(2)));
}

// ------------------------------------------------------------------------------ verify chart

/**
 * Verify time against body size, one line per implementation, from bench/micro.mjs's JSON.
 * Times are drawn in µs per call; the y axis is logarithmic when the times span more than a factor
 * of 20, the x axis (body size) when the sizes span more than a factor of 8. Each point is the
 * median over rounds, with a vertical bar for the min–max across rounds.
 */
export function verifyChart(micro, options = {}) {
  const wanted = options.series ?? VERIFY_SERIES;
  const byId = new Map((micro.cases ?? []).map((k) => [k.id, k]));
  const series = wanted.map((id) => byId.get(id)).filter((k) => k && (k.results ?? []).length > 0);
  if (series.length === 0) throw new Error("verifyChart: none of the series is in the results");
  const points = series.flatMap((k) => k.results);
  const sizes = [...new Set(points.map((p) => p.size))].sort((a, b) => a - b);
  const us = (ns) => ns / 1000;
  const values = points.flatMap((p) => [p.minNs ?? p.medianNs, p.maxNs ?? p.medianNs, p.medianNs]).map(us);
  if (values.some((v) => !(v > 0) || !Number.isFinite(v))) throw new Error("verifyChart: every time must be > 0");
  let lo = Math.min(...values);
  let hi = Math.max(...values);
  const logY = hi / lo > 20;
  let yTicks;
  if (logY) {
    lo = 10 ** Math.floor(Math.log10(lo));
    hi = 10 ** Math.ceil(Math.log10(hi));
    yTicks = logTicks(lo, hi);
  } else {
    const nice = linearTicks(hi);
    lo = 0;
    hi = nice.top;
    yTicks = nice.ticks;
  }
  const logX = sizes[sizes.length - 1] / sizes[0] > 8;

  const width = 900;
  const legendWidth = 250;
  const title = options.title ?? "Verifying one signature: time per call against body size";
  const head = heading(
    width,
    title,
    `Median of ${micro.rounds ?? "?"} interleaved rounds; bars: min–max across rounds; lower is better. ` +
      "Every call verified a valid signature.",
    micro.quick,
  );
  const plot = { left: 84, top: head.bottom + 24, right: width - legendWidth - 24, bottom: 0 };
  const ratioRows = byId.has("limit") ? series.filter((k) => k.id !== "limit").length : -3;
  const height = plot.top + 330 + 70 + 32 + (ratioRows + 1) * 18;
  plot.bottom = plot.top + 330;
  const x =
    sizes.length === 1
      ? () => (plot.left + plot.right) / 2
      : scale(sizes[0], sizes[sizes.length - 1], plot.left + 24, plot.right - 24, logX);
  const y = scale(lo, hi, plot.bottom, plot.top, logY);

  const out = [...head.lines];
  // Grid, y ticks and labels.
  for (const t of yTicks) {
    const ty = y(t);
    const major = !logY || Number.isInteger(Math.log10(t));
    out.push(
      `<line x1="${c(plot.left)}" y1="${c(ty)}" x2="${c(plot.right)}" y2="${c(ty)}" stroke="${GRID}" stroke-width="${major ? 1 : 0.5}"${major ? "" : ' stroke-dasharray="2 3"'}/>`,
      text(plot.left - 8, ty + 4, tickLabel(t), `font-size="11.5" text-anchor="end" fill="${MUTED}"`),
    );
  }
  for (const size of sizes) {
    const tx = x(size);
    out.push(
      `<line x1="${c(tx)}" y1="${c(plot.top)}" x2="${c(tx)}" y2="${c(plot.bottom)}" stroke="${GRID}" stroke-width="0.5"/>`,
      text(tx, plot.bottom + 18, formatBytes(size), `font-size="11.5" text-anchor="middle" fill="${MUTED}"`),
    );
  }
  out.push(
    `<rect x="${c(plot.left)}" y="${c(plot.top)}" width="${c(plot.right - plot.left)}" height="${c(plot.bottom - plot.top)}" fill="none" stroke="${MUTED}" stroke-width="1"/>`,
    text(
      (plot.left + plot.right) / 2,
      plot.bottom + 40,
      `body size${logX ? " (log scale)" : ""}`,
      'font-size="13" text-anchor="middle"',
    ),
    text(
      0,
      0,
      `µs per call${logY ? " (log scale)" : ""}`,
      `font-size="13" text-anchor="middle" transform="translate(${c(24)} ${c((plot.top + plot.bottom) / 2)}) rotate(-90)"`,
    ),
  );

  // Series: min–max bars, the line through the medians, markers with a tooltip. Drawn last to
  // first, so the first (ours) is on top where lines cross.
  [...series.entries()].reverse().forEach(([i, k]) => {
    const style = STYLES[i % STYLES.length];
    const label = seriesLabel(k);
    const results = [...k.results].sort((a, b) => a.size - b.size);
    const group = [`<g data-series="${escapeXml(k.id)}">`];
    const offset = (i - (series.length - 1) / 2) * 3; // min–max bars side by side, not on top of each other
    for (const p of results) {
      if (p.minNs !== undefined && p.maxNs !== undefined) {
        const px = x(p.size) + offset;
        group.push(
          `<line x1="${c(px)}" y1="${c(y(us(p.minNs)))}" x2="${c(px)}" y2="${c(y(us(p.maxNs)))}" stroke="${style.color}" stroke-width="1.5" stroke-opacity="0.55"/>`,
        );
      }
    }
    const path = results.map((p, j) => `${j === 0 ? "M" : "L"}${c(x(p.size))},${c(y(us(p.medianNs)))}`).join(" ");
    group.push(
      `<path d="${path}" fill="none" stroke="${style.color}" stroke-width="${style.width}"${style.dash ? ` stroke-dasharray="${style.dash}"` : ""} stroke-linejoin="round"/>`,
    );
    for (const p of results) {
      const tip =
        `${label}, ${formatBytes(p.size)}: ${formatNumber(us(p.medianNs))} µs per call` +
        (p.minNs !== undefined ? ` (min ${formatNumber(us(p.minNs))}, max ${formatNumber(us(p.maxNs))})` : "");
      group.push(
        `<g>${marker(MARKERS[i % MARKERS.length], x(p.size), y(us(p.medianNs)), i === 0 ? 5 : 4, style.color, `data-size="${p.size}" data-value="${c(us(p.medianNs))}"`)}<title>${escapeXml(tip)}</title></g>`,
      );
    }
    group.push("</g>");
    out.push(...group);
  });

  // Legend: sample line, marker and name; the first series (ours) in bold.
  const lx = plot.right + 24;
  out.push(text(lx, plot.top + 4, "implementation", `font-size="12" font-weight="600" fill="${MUTED}"`));
  series.forEach((k, i) => {
    const style = STYLES[i % STYLES.length];
    const ly = plot.top + 28 + i * 26;
    out.push(
      `<line x1="${c(lx)}" y1="${c(ly)}" x2="${c(lx + 34)}" y2="${c(ly)}" stroke="${style.color}" stroke-width="${style.width}"${style.dash ? ` stroke-dasharray="${style.dash}"` : ""}/>`,
      marker(MARKERS[i % MARKERS.length], lx + 17, ly, i === 0 ? 5 : 4, style.color, ""),
      text(lx + 44, ly + 4, seriesLabel(k), `font-size="12.5"${i === 0 ? ' font-weight="700"' : ""}`),
    );
  });
  // Under the plot, the ratio of each median to the baseline's at every size: the headline figure,
  // which the log scale makes hard to read off near 1.00×.
  const limit = byId.get("limit");
  if (limit) {
    const at = (k, size) => k.results.find((p) => p.size === size)?.medianNs;
    // The first column clears the heading, the longest text of the left column.
    const column = (j) => 340 + ((plot.right - 340) / Math.max(1, sizes.length - 1)) * j;
    let ty = plot.bottom + 76;
    out.push(text(24, ty, `median ÷ ${BASELINE_LABEL}`, `font-size="12" font-weight="600" fill="${MUTED}"`));
    sizes.forEach((size, j) => {
      out.push(
        text(column(j), ty, formatBytes(size), `font-size="12" font-weight="600" fill="${MUTED}" text-anchor="end"`),
      );
    });
    for (const k of series) {
      if (k.id === "limit") continue;
      ty += 18;
      const bold = k === series[0] ? ' font-weight="700"' : "";
      out.push(text(24, ty, seriesLabel(k), `font-size="12"${bold}`));
      sizes.forEach((size, j) => {
        const ratio = at(k, size) / at(limit, size);
        out.push(
          text(
            column(j),
            ty,
            Number.isFinite(ratio) ? `${formatNumber(ratio)}×` : "n/a",
            `font-size="12" text-anchor="end"${bold}`,
          ),
        );
      });
    }
  }
  out.push(footer(height, micro));
  const description =
    `Line chart, ${logY ? "log" : "linear"} y: median µs per verification against body size for ` +
    series.map(seriesLabel).join(", ") +
    ".";
  return document(width, height, title, description, out);
}

// -------------------------------------------------------------------------------- HTTP chart

/**
 * Requests per second and server CPU µs per request of each receiver, as horizontal bars (the
 * median over rounds) with a whisker for the min–max across rounds, from bench/http.mjs's JSON.
 * The bare node:http receiver's median is drawn as a dashed reference line in both panels, and
 * every bar is labelled with its median and its ratio to that receiver.
 */
export function httpChart(http, options = {}) {
  const cases = (http.cases ?? []).filter((k) => k.rps && k.cpuUsPerReq);
  if (cases.length === 0) throw new Error("httpChart: no receivers in the results");
  const baseline = cases.find((k) => k.id === (options.baseline ?? "bare-node"));
  const width = 980;
  const title = options.title ?? `Receiving a ${formatBytes(http.bodySize ?? 2048)} signed delivery over loopback`;
  const head = heading(
    width,
    title,
    `${http.connections ?? "?"} connections, ${http.rounds ?? "?"} rounds of ${http.durationS ?? "?"} s per receiver ` +
      "(interleaved); bars: median, whiskers: min–max across rounds; ratios against bare node:http.",
    http.quick,
  );
  const labelWidth = 250;
  const gap = 46;
  const rowHeight = 34;
  const panelTop = head.bottom + 44;
  const panelBottom = panelTop + cases.length * rowHeight;
  const height = panelBottom + 94;
  const panels = [
    { key: "rps", title: "requests per second (more is better)", unit: "req/s", digits: 0 },
    { key: "cpuUsPerReq", title: "server CPU per request, µs (less is better)", unit: "µs", digits: 1 },
  ];
  const panelWidth = (width - 24 - labelWidth - gap - 24) / 2;
  const out = [...head.lines];

  cases.forEach((k, row) => {
    const cy = panelTop + row * rowHeight + rowHeight / 2;
    const ours = Boolean(k.ours);
    out.push(
      text(
        24 + labelWidth - 12,
        cy + 4,
        k.label ?? k.name ?? k.id,
        `font-size="12.5" text-anchor="end"${ours ? ' font-weight="700"' : ""}`,
      ),
    );
  });

  panels.forEach((panel, p) => {
    const left = 24 + labelWidth + p * (panelWidth + gap);
    const right = left + panelWidth - 96; // room for the value labels
    const max = Math.max(...cases.map((k) => k[panel.key].max ?? k[panel.key].median));
    const { top, ticks } = linearTicks(max);
    const x = scale(0, top, left, right, false);
    out.push(text(left, panelTop - 22, panel.title, 'font-size="13" font-weight="600"'));
    for (const t of ticks) {
      out.push(
        `<line x1="${c(x(t))}" y1="${c(panelTop - 6)}" x2="${c(x(t))}" y2="${c(panelBottom)}" stroke="${GRID}" stroke-width="${t === 0 ? 1.2 : 0.6}"/>`,
        text(x(t), panelBottom + 16, formatNumber(t, 0), `font-size="11" text-anchor="middle" fill="${MUTED}"`),
      );
    }
    out.push(
      text((left + right) / 2, panelBottom + 36, panel.unit, `font-size="12" text-anchor="middle" fill="${MUTED}"`),
    );
    const group = [`<g data-panel="${panel.key}">`];
    cases.forEach((k, row) => {
      const v = k[panel.key];
      const y0 = panelTop + row * rowHeight + 7;
      const barHeight = rowHeight - 14;
      const color = k.ours ? OURS : "#8c959f";
      const ratio = baseline && k !== baseline ? ` (${formatNumber(v.median / baseline[panel.key].median)}×)` : "";
      const tip = `${k.label ?? k.id}: ${formatNumber(v.median, panel.digits)} ${panel.unit}${ratio}, min ${formatNumber(v.min ?? v.median, panel.digits)}, max ${formatNumber(v.max ?? v.median, panel.digits)}`;
      group.push(
        `<rect x="${c(x(0))}" y="${c(y0)}" width="${c(x(v.median) - x(0))}" height="${c(barHeight)}" fill="${color}" data-case="${escapeXml(k.id)}" data-value="${c(v.median)}"><title>${escapeXml(tip)}</title></rect>`,
      );
      if (v.min !== undefined && v.max !== undefined) {
        const wy = y0 + barHeight / 2;
        group.push(
          `<path d="M${c(x(v.min))},${c(wy - 5)} V${c(wy + 5)} M${c(x(v.min))},${c(wy)} H${c(x(v.max))} M${c(x(v.max))},${c(wy - 5)} V${c(wy + 5)}" stroke="${INK}" stroke-width="1.3" fill="none"/>`,
        );
      }
      group.push(
        text(
          Math.max(x(v.max ?? v.median), x(v.median)) + 6,
          y0 + barHeight / 2 + 4,
          `${formatNumber(v.median, panel.digits)}${ratio}`,
          `font-size="11.5"${k.ours ? ' font-weight="700"' : ""}`,
        ),
      );
    });
    group.push("</g>");
    out.push(...group);
    if (baseline) {
      const bx = x(baseline[panel.key].median);
      out.push(
        `<line x1="${c(bx)}" y1="${c(panelTop - 6)}" x2="${c(bx)}" y2="${c(panelBottom)}" stroke="${INK}" stroke-width="1" stroke-dasharray="4 3"/>`,
      );
    }
  });

  // Legend.
  const ly = panelBottom + 56;
  out.push(
    `<rect x="24" y="${c(ly - 9)}" width="14" height="10" fill="${OURS}"/>`,
    text(44, ly, "flag-webhooks", 'font-size="12" font-weight="700"'),
    `<rect x="150" y="${c(ly - 9)}" width="14" height="10" fill="#8c959f"/>`,
    text(170, ly, "hand-written or other library", 'font-size="12"'),
    `<line x1="380" y1="${c(ly - 4)}" x2="404" y2="${c(ly - 4)}" stroke="${INK}" stroke-dasharray="4 3"/>`,
    text(410, ly, "bare node:http median", 'font-size="12"'),
    `<path d="M560,${c(ly - 9)} V${c(ly + 1)} M560,${c(ly - 4)} H590 M590,${c(ly - 9)} V${c(ly + 1)}" stroke="${INK}" stroke-width="1.3" fill="none"/>`,
    text(596, ly, "min–max across rounds", 'font-size="12"'),
  );
  out.push(footer(height, http));
  const description =
    "Horizontal bar charts: median requests per second and server CPU µs per request for " +
    cases.map((k) => k.label ?? k.id).join(", ") +
    ".";
  return document(width, height, title, description, out);
}

/**
 * Every chart the results allow, by file name: `bench-verify.svg` from the micro part,
 * `bench-http.svg` from the HTTP part. `results` is bench/results.json: `{ micro?, http? }`.
 */
export function charts(results) {
  const files = {};
  if (results.micro) files["bench-verify.svg"] = verifyChart(results.micro);
  if (results.http) files["bench-http.svg"] = httpChart(results.http);
  return files;
}
