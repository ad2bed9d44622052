import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { expect, it } from "vitest";

const root = resolve(import.meta.dirname, "../..");

it("npm run demo tells the story end to end on the emulator, as promised", () => {
  // npm test builds dist before vitest; the demo imports the built package by name and runs dist/cli.js.
  expect(existsSync(join(root, "dist/emulator.js")), "dist is not built: run npm run build").toBe(true);
  let output: string;
  try {
    output = execFileSync(join(root, "node_modules/.bin/tsx"), ["scripts/demo.ts"], {
      cwd: root,
      encoding: "utf8",
      timeout: 60_000,
    });
  } catch (error) {
    // The demo's own account of what went wrong is on its stdout and stderr.
    const { stdout, stderr } = error as { stdout?: string; stderr?: string };
    throw new Error(`npm run demo failed:\n${stdout ?? ""}\n${stderr ?? ""}`);
  }
  expect(output).toMatch(/flag\.updated production ← 200 .*on: false → true/);
  expect(output).toMatch(/flag\.updated production \(tampered\) ← 401 \{"error":\{"code":"invalid_signature"/);
  expect(output).toMatch(/flag\.updated production \(redelivery\) ← 204 \n/);
  expect(output).toContain('"code":"event_expired"');
  // Keep then work: kept and answered 202, listed pending by the command between the failed
  // attempts, then done once on the third.
  expect(output).toMatch(/flag\.updated staging ← 202 \n/);
  expect(output).toMatch(/^ {3}ID +STATE +TYPE +FLAG +ATTEMPTS +LAST ERROR +NEXT ATTEMPT$/m);
  expect(output).toMatch(
    /^ {3}evt_\w+ +pending +flag\.updated +new-checkout +1 +the billing API is down \(attempt 1\) +in \d+s$/m,
  );
  expect(output).toContain("→ the worker's third attempt: done after 3 attempts");
  expect(output).toContain("✓ done once by the worker on its third attempt: 3 runs, its billing_sync row written once");
  expect(output).not.toContain("✗");
  expect(output).toContain("Everything happened as promised.");
});
