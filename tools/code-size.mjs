#!/usr/bin/env node
// Lists what breaks the size rules of src/: a file over 400 lines, a function (declaration,
// method, arrow, accessor) over 80. The emulator page's assets are .js/.css/.html, not read here.
// Exits 1 when it lists anything, so it can gate a change:
//   node tools/code-size.mjs [folder, default src] [--file-lines 400] [--function-lines 80]
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import ts from "typescript";

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    "file-lines": { type: "string", default: "400" },
    "function-lines": { type: "string", default: "80" },
  },
});
const fileMax = Number(values["file-lines"]);
const functionMax = Number(values["function-lines"]);
const found = [];

function files(folder) {
  return readdirSync(folder, { withFileTypes: true }).flatMap((entry) => {
    const path = join(folder, entry.name);
    if (entry.isDirectory()) return files(path);
    return entry.name.endsWith(".ts") ? [path] : [];
  });
}

for (const file of files(positionals[0] ?? "src")) {
  const text = readFileSync(file, "utf8");
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const lineOf = (position) => source.getLineAndCharacterOfPosition(position).line + 1;
  const lines = text.split("\n").length - (text.endsWith("\n") ? 1 : 0);
  if (lines > fileMax) found.push(`${file}: ${lines} lines`);
  const visit = (node) => {
    if (ts.isFunctionLike(node) && "body" in node && node.body) {
      const first = lineOf(node.getStart(source));
      const length = lineOf(node.end) - first + 1;
      const name = node.name?.getText(source) ?? "(anonymous)";
      if (length > functionMax) found.push(`${file}:${first}: ${name} is ${length} lines`);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
}

for (const line of found) console.log(line);
process.exitCode = found.length > 0 ? 1 : 0;
