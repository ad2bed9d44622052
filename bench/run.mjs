// Runs the whole benchmark suite, each part in its own fresh Node process, prints the tables and
// writes them to bench/results.md (ready to paste into bench/README.md, "Latest results"), the raw
// figures to bench/results.json, and draws the charts from them into docs/ (bench/charts.mjs):
// docs/bench-verify.svg (micro) and docs/bench-http.svg (HTTP).
//
//   node bench/run.mjs                   # micro (~2-3 min) then HTTP (~5 min)
//   BENCH_QUICK=1 node bench/run.mjs     # ~1 min smoke run
//   node bench/run.mjs micro             # only one part: micro | http (charts of that part only)
//   node bench/run.mjs charts            # no benchmark: redraw the charts from bench/results.json
//
// Env: FLAG_WEBHOOKS_DIST (built library; default ../dist), and each script's own knobs (see
// bench/README.md).
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { charts } from "./charts.mjs";
import { BENCH_DIR, distDir, machine, QUICK } from "./lib.mjs";

const DOCS_DIR = join(BENCH_DIR, "../docs");
const JSON_OUTPUT = join(BENCH_DIR, "results.json");

/** Writes every chart the results allow into docs/; returns the paths written. */
function drawCharts(results) {
  return Object.entries(charts(results)).map(([file, svg]) => {
    const path = join(DOCS_DIR, file);
    writeFileSync(path, svg);
    return path;
  });
}

if (process.argv[2] === "charts") {
  if (!existsSync(JSON_OUTPUT)) {
    console.error(`bench: no ${JSON_OUTPUT} to draw from: run the benchmark first`);
    process.exit(1);
  }
  for (const path of drawCharts(JSON.parse(readFileSync(JSON_OUTPUT, "utf8")))) console.error(`bench: chart ${path}`);
  process.exit(0);
}

const PARTS = { micro: "micro.mjs", http: "http.mjs" };
const selected = process.argv.slice(2);
for (const name of selected) {
  if (!PARTS[name]) {
    console.error(`unknown part "${name}"; choose from: ${Object.keys(PARTS).join(", ")}`);
    process.exit(2);
  }
}
const parts = selected.length > 0 ? selected : Object.keys(PARTS);

const dist = distDir();
if (!existsSync(join(dist, "index.js"))) {
  console.error(`flag-webhooks is not built at ${dist}: run \`npm run build\` first, or set FLAG_WEBHOOKS_DIST`);
  process.exit(1);
}

const work = mkdtempSync(join(tmpdir(), "flag-webhooks-bench-"));
const resultsFile = join(work, "results.md");
writeFileSync(resultsFile, "");

let current;
const stop = () => current?.kill("SIGTERM");
process.on("exit", () => {
  stop();
  rmSync(work, { recursive: true, force: true });
});
for (const signal of ["SIGINT", "SIGTERM"]) {
  process.on(signal, () => {
    stop();
    process.exit(130);
  });
}

function runPart(script, jsonFile) {
  return new Promise((resolve) => {
    current = spawn(process.execPath, [join(BENCH_DIR, script)], {
      cwd: BENCH_DIR,
      env: { ...process.env, FLAG_WEBHOOKS_DIST: dist, BENCH_RESULTS_FILE: resultsFile, BENCH_JSON_FILE: jsonFile },
      stdio: "inherit",
    });
    current.on("exit", (code, signal) => {
      current = undefined;
      resolve(code ?? (signal ? 1 : 0));
    });
  });
}

const started = Date.now();
let failed = false;
const results = {};
for (const name of parts) {
  const jsonFile = join(work, `${name}.json`);
  const code = await runPart(PARTS[name], jsonFile);
  if (code !== 0) {
    console.error(`bench: ${name} failed (exit ${code})`);
    failed = true;
  } else if (existsSync(jsonFile)) {
    results[name] = JSON.parse(readFileSync(jsonFile, "utf8"));
  }
}

const header = [
  "# flag-webhooks benchmark results",
  "",
  `Run ${new Date().toISOString()} on ${machine()}${QUICK ? ", **BENCH_QUICK smoke run (not for publication)**" : ""}; ` +
    `total ${((Date.now() - started) / 1000).toFixed(0)} s.`,
  "",
].join("\n");
const output = join(BENCH_DIR, "results.md");
writeFileSync(output, `${header}\n${readFileSync(resultsFile, "utf8").trimEnd()}\n`);
console.error(`bench: tables written to ${output}`);
// A failed part draws no chart: the charts in docs/ stay those of the last run that passed.
if (Object.keys(results).length > 0) {
  writeFileSync(JSON_OUTPUT, `${JSON.stringify(results, null, 2)}\n`);
  console.error(`bench: raw figures written to ${JSON_OUTPUT}`);
  for (const path of drawCharts(results)) console.error(`bench: chart ${path}`);
}
if (failed) process.exitCode = 1;
