import { cpSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { join, sep } from "node:path";
import { createEvent, signedDelivery } from "flag-webhooks/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../support/free-port.js";
import { installPacked } from "../support/packed.js";
import { hostBin, hostEnv, hosts, type Running, root, run, serve } from "./serve.js";

// The shipped examples/nextjs, as a user copies it into a Next.js app with flag-webhooks installed
// from the packed tarball: `next build` with WEBHOOK_SECRET unset, as a CI build or a Docker image
// build runs (Next.js evaluates each route's module to collect its config), then `next start`
// with the secret, as deployed. The app sits in a folder of its own under test/hosts, so that
// Next.js and React resolve from this package's node_modules as the hosts' apps do.

const SECRET = "whsec_next_example_test";
let dir: string;
let port: number;
let served: Running | undefined;

beforeAll(async () => {
  dir = mkdtempSync(join(hosts, ".example-next-"));
  cpSync(join(root, "examples/nextjs"), dir, { recursive: true });
  writeFileSync(join(dir, "next.config.mjs"), nextConfig());
  installPacked(dir);
  port = await freePort();
}, 60_000);

afterAll(async () => {
  await served?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
}, 30_000);

/**
 * The hosts' Next.js config (test/hosts/next/next.config.mjs) for this app: Next.js looks for its
 * own package and traces files under one root, here the folder that holds both test/hosts and its
 * node_modules (the same folder, unless node_modules is a link to another checkout's). The example
 * is type-checked with the others (tsconfig.test.json): Next.js need not do it again.
 */
function nextConfig(): string {
  const a = realpathSync(hosts).split(sep);
  const b = realpathSync(join(hosts, "node_modules")).split(sep);
  let shared = 0;
  while (shared < a.length && a[shared] === b[shared]) shared++;
  const common = JSON.stringify(a.slice(0, shared).join(sep) || sep);
  return `export default { turbopack: { root: ${common} }, outputFileTracingRoot: ${common}, typescript: { ignoreBuildErrors: true } };\n`;
}

describe("examples/nextjs in a Next.js app", () => {
  it("builds with next build while WEBHOOK_SECRET is unset", async () => {
    const env = hostEnv();
    delete env.WEBHOOK_SECRET;
    const output = await run("next build", process.execPath, [hostBin("next"), "build"], dir, env);
    expect(output).toMatch(/\/webhooks/);
  }, 240_000);

  it("then, served by next start with the secret, handles a signed delivery and refuses a forged one", async () => {
    served = await serve(
      "next start",
      process.execPath,
      [hostBin("next"), "start", "--port", String(port), "--hostname", "127.0.0.1"],
      dir,
      hostEnv({ WEBHOOK_SECRET: SECRET }),
      port,
    );
    const event = createEvent("flag.updated");
    const { body, headers } = await signedDelivery({ secret: SECRET, event });
    const url = `http://127.0.0.1:${port}/webhooks`;
    const ok = await fetch(url, { method: "POST", headers, body });
    expect(ok.status).toBe(204);
    const forged = await fetch(url, {
      method: "POST",
      headers: { ...headers, "service-signature": "0".repeat(64) },
      body,
    });
    expect([forged.status, ((await forged.json()) as { error: { code: string } }).error.code]).toEqual([
      401,
      "invalid_signature",
    ]);
    expect(served.output()).toContain(`flag ${event.data.flag} changed by ${event.data.actor.email}`);
  }, 120_000);
});
