// Runs the whole benchmark suite, each part in its own fresh Node process, prints the tables and
// writes them to bench/results.md (ready to paste into bench/README.md, "Latest results").
//
//   node bench/run.mjs                   # micro (~2-3 min) then HTTP (~2 min)
//   BENCH_QUICK=1 node bench/run.mjs     # ~1 min smoke run
//   node bench/run.mjs micro             # only one part: micro | http
//
// Env: FLAG_WEBHOOKS_DIST (built library; default ../dist), and each script's own knobs (see
// bench/README.md).
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BENCH_DIR, distDir, machine, QUICK } from "./lib.mjs";

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

function runPart(script) {
  return new Promise((resolve) => {
    current = spawn(process.execPath, [join(BENCH_DIR, script)], {
      cwd: BENCH_DIR,
      env: { ...process.env, FLAG_WEBHOOKS_DIST: dist, BENCH_RESULTS_FILE: resultsFile },
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
for (const name of parts) {
  const code = await runPart(PARTS[name]);
  if (code !== 0) {
    console.error(`bench: ${name} failed (exit ${code})`);
    failed = true;
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
if (failed) process.exitCode = 1;
