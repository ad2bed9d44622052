import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

// The held answer (node/watch-answer.ts) patches Node's ServerResponse, whose methods call each
// other differently from one major to the next (writeHead takes an array of headers through
// appendHeader since 22, writeContinue goes through writeInformation in 24). The suite runs on
// Node 20; this runs the files that exercise every method of the response on a held answer on
// Node 22 and 24 too, each in a vitest of its own on that Node (node:http2's compatibility response too).

const root = resolve(import.meta.dirname, "../..");
const FILES = [
  "test/node/held-methods.test.ts",
  "test/node/held-writes.test.ts",
  "test/node/refusals.test.ts",
  "test/node/watched-twice.test.ts",
  "test/node/attack-http2-compat.test.ts",
];
const NODES = {
  "Node 22": join(root, "tools/node-versions/node_modules/node22/bin/node"),
  "Node 24": join(root, "tools/node-versions/node_modules/node24/bin/node"),
};

describe.each(Object.entries(NODES))("on %s", (_name, node) => {
  it("a held answer behaves as on Node 20: every test of the held-answer files passes", async () => {
    expect(existsSync(node), `${node} is missing: run npm install --prefix tools/node-versions`).toBe(true);
    // The child is a vitest of its own: none of this run's variables, which would make it a worker.
    const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith("VITEST")));
    const args = [join(root, "node_modules/vitest/vitest.mjs"), "run", ...FILES, "--typecheck.enabled=false"];
    const { stdout } = await promisify(execFile)(node, args, { cwd: root, env: { ...env, NO_COLOR: "1" } }).catch(
      (error: { stdout?: string; stderr?: string }) => {
        throw new Error(`vitest failed on ${node}:\n${error.stdout}\n${error.stderr}`);
      },
    );
    expect(stdout).toMatch(new RegExp(`Test Files\\s+${FILES.length} passed \\(${FILES.length}\\)`));
    expect(stdout).not.toMatch(/failed|skipped/);
  }, 120_000);
});
