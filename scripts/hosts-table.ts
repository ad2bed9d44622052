// Writes the README's table of hosts (between its hosts-table markers) from test/hosts/hosts.json,
// the one table that also drives test/hosts/hosts.test.ts: `npm run docs:hosts`.
import { readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(import.meta.dirname, "..");

/** One row of test/hosts/hosts.json: a host, how flag-webhooks runs there, and what its test starts. */
export interface Host {
  /** Stable id; hosts.test.ts has one driver per id. */
  id: string;
  /** The framework or platform, as the README names it. */
  host: string;
  /** The app under test/hosts/ that serves this host's route. */
  app: string;
  /** The route's path on that app. */
  path: string;
  /** The app's files shown as the recipe, relative to the app: each is on docs/hosts.md verbatim. */
  files: string[];
  /** The registry packages the host runs on, whose installed versions the test reports. */
  packages: string[];
  /** The flag-webhooks entry to use there. */
  entry: string;
  /** How the raw body reaches flag-webhooks. */
  rawBody: string;
  /** Which dedupe store fits the host. */
  store: string;
  /** The recipe's anchor on docs/hosts.md. */
  recipe: string;
}

export const START = "<!-- hosts-table: start (written by npm run docs:hosts from test/hosts/hosts.json) -->";
export const END = "<!-- hosts-table: end -->";

/** The rows of test/hosts/hosts.json. */
export function readHosts(): Host[] {
  return JSON.parse(readFileSync(join(root, "test/hosts/hosts.json"), "utf8")) as Host[];
}

/** The Markdown table of `hosts`, as the README shows it. */
export function hostsTable(hosts: Host[]): string {
  const rows = [
    ["host", "entry", "how the raw body is read", "dedupe store that fits", "recipe"],
    ...hosts.map((h) => [h.host, `\`${h.entry}\``, h.rawBody, h.store, `[recipe](docs/hosts.md#${h.recipe})`]),
  ];
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((row) => (row[i] ?? "").length))) ?? [];
  const line = (cells: string[]) => `| ${cells.map((cell, i) => cell.padEnd(widths[i] ?? 0)).join(" | ")} |`;
  const [head = [], ...body] = rows;
  return [line(head), line(widths.map((w) => "-".repeat(w))), ...body.map(line)].join("\n");
}

/** `readme` with the text between the markers replaced by the table of `hosts`. */
export function withHostsTable(readme: string, hosts: Host[]): string {
  const start = readme.indexOf(START);
  const end = readme.indexOf(END);
  if (start < 0 || end < start) throw new Error(`the README has no ${START} ... ${END} markers`);
  return `${readme.slice(0, start + START.length)}\n\n${hostsTable(hosts)}\n\n${readme.slice(end)}`;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const path = join(root, "README.md");
  writeFileSync(path, withHostsTable(readFileSync(path, "utf8"), readHosts()));
}
