import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { expect, it } from "vitest";

const root = resolve(import.meta.dirname, "..");

it("npm run demo sends real signed deliveries to the Express example and gets the promised answers", () => {
  // npm test builds dist before vitest; the demo imports the built package by name.
  expect(existsSync(join(root, "dist/express.js")), "dist is not built: run npm run build").toBe(true);
  const output = execFileSync(join(root, "node_modules/.bin/tsx"), ["scripts/demo.ts"], {
    cwd: root,
    encoding: "utf8",
    timeout: 30_000,
  });
  expect(output).toMatch(/← 200 \{"received":"evt_demo_1"/);
  expect(output).toMatch(/← 401 \{"error":\{"code":"invalid_signature"/);
  expect(output).toMatch(/← 401 \{"error":\{"code":"missing_signature"/);
  expect(output).toMatch(/← 413 \{"error":\{"code":"payload_too_large"/);
  expect(output).toContain("All deliveries were answered as expected.");
});
