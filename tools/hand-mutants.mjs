#!/usr/bin/env node
// Applies, one at a time, the mutants a Stryker run left alive in one file, and runs the given
// test files against each with plain vitest: the check for mutants Stryker cannot switch on
// reliably. Module-level code and code a test reaches in beforeAll are "static" to Stryker: its
// vitest runner runs them only with the tests it saw reach them, often the first of a file, so a
// constant the suite does check (a header name, a set of codes) can read as a survivor. Here each
// mutant is written into the source itself, as a developer would, and the tests run on a fresh
// module graph.
//
// Run it in a scratch checkout (it rewrites the file, and restores it after each mutant):
//   node tools/hand-mutants.mjs --report reports/mutation/mutation.json --file src/receiver.ts \
//     --tests test/receiver/every-adapter.test.ts,test/adapters/express.test.ts [--static] [--json out.json]
// A mutant the test set kills is killed by the whole suite; one it does not kill may still be
// killed by a test outside the set, so the figure is a lower bound, like STRYKER_TESTS's.
import { spawnSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { parseArgs } from "node:util";

const { values } = parseArgs({
  options: {
    report: { type: "string", default: "reports/mutation/mutation.json" },
    file: { type: "string" },
    tests: { type: "string" },
    static: { type: "boolean", default: false },
    json: { type: "string" },
  },
});
if (!values.file || !values.tests) {
  console.error("usage: hand-mutants.mjs --file src/x.ts --tests a.test.ts,b.test.ts [--static] [--report r.json]");
  process.exit(2);
}
const report = JSON.parse(readFileSync(values.report, "utf8"));
const entry = report.files[values.file];
if (!entry) {
  console.error(`${values.file} is not in ${values.report}`);
  process.exit(2);
}
const original = readFileSync(values.file, "utf8");
if (original !== entry.source) {
  console.error(`${values.file} changed since the report was made: run Stryker again first`);
  process.exit(2);
}
// Line and column are 1-based in the report; turn them into offsets in the source.
const lineStarts = [0];
for (let i = 0; i < original.length; i++) if (original[i] === "\n") lineStarts.push(i + 1);
const offset = ({ line, column }) => lineStarts[line - 1] + column - 1;

const alive = entry.mutants.filter(
  (mutant) => (mutant.status === "Survived" || mutant.status === "NoCoverage") && (!values.static || mutant.static),
);
const tests = values.tests.split(",").map((file) => file.trim());
const results = [];
try {
  for (const mutant of alive) {
    const start = offset(mutant.location.start);
    const end = offset(mutant.location.end);
    writeFileSync(values.file, original.slice(0, start) + mutant.replacement + original.slice(end));
    const run = spawnSync("npx", ["vitest", "run", "--bail", "1", "--reporter", "dot", ...tests], {
      encoding: "utf8",
      env: { ...process.env, CI: "true" },
    });
    const killed = run.status !== 0;
    const where = `${values.file}:${mutant.location.start.line}:${mutant.location.start.column}`;
    const line = `${killed ? "killed  " : "survived"} ${where} ${mutant.mutatorName} ${JSON.stringify(mutant.replacement).slice(0, 70)}`;
    console.log(line);
    results.push({ id: mutant.id, where, mutator: mutant.mutatorName, replacement: mutant.replacement, killed });
  }
} finally {
  writeFileSync(values.file, original);
}
const killed = results.filter((result) => result.killed).length;
console.log(`${killed} of ${results.length} killed by hand`);
if (values.json) writeFileSync(values.json, `${JSON.stringify(results, null, 2)}\n`);
