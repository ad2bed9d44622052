import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable, Writable } from "node:stream";
import { afterEach, describe, expect, it } from "vitest";
import { main } from "../src/cli/main.js";

// `flag-webhooks dev` run in-process through main(), as in test/mutation-rest-dev.test.ts: the ways
// it ends with an error after the user's input passed its own checks (the API refusing the
// --forward webhook, an address Node cannot listen on, a path that happens to contain "--token"),
// and what it leaves behind (the port, the signal handlers) when it does.

interface Dev {
  out: () => string;
  err: () => string;
  exited: Promise<number>;
}

const running = new Set<Promise<number>>();

function dev(args: string[], env: Record<string, string> = {}): Dev {
  let out = "";
  let err = "";
  const stream = (add: (text: string) => void) =>
    new Writable({
      write(chunk: Buffer, _encoding, done) {
        add(String(chunk));
        done();
      },
    });
  const exited: Promise<number> = main(["dev", ...args], {
    env,
    stdin: Readable.from([]),
    stdout: stream((text) => {
      out += text;
    }),
    stderr: stream((text) => {
      err += text;
    }),
  });
  running.add(exited);
  void exited.finally(() => running.delete(exited));
  return { out: () => out, err: () => err, exited };
}

const dirs: string[] = [];
afterEach(async () => {
  // A failed test may leave a dev run going: stop it, so that the next test starts clean.
  for (let i = 0; i < 50 && running.size > 0; i++) {
    if (process.listenerCount("SIGINT") > 0) process.emit("SIGINT");
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

async function expectUsageError(run: Dev, message: string) {
  expect(await run.exited).toBe(2);
  expect(run.err()).toBe(`flag-webhooks: ${message}\nRun "flag-webhooks dev --help" for usage.\n`);
  expect(run.out()).toBe("");
}

/** A port nothing listens on now. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** Whether a server can listen on the port (so nothing else holds it). */
async function canListen(port: number): Promise<boolean> {
  const server: Server = createServer();
  const ok = await new Promise<boolean>((resolve) => {
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => resolve(true));
  });
  if (ok) await new Promise((resolve) => server.close(resolve));
  return ok;
}

/** The error code Node's listen gives for the address, or "" when it can listen there. */
async function listenError(host: string): Promise<string> {
  const server = createServer();
  const code = await new Promise<string>((resolve) => {
    server.once("error", (error: NodeJS.ErrnoException) => resolve(error.code ?? "?"));
    server.listen(0, host, () => resolve(""));
  });
  if (code === "") await new Promise((resolve) => server.close(resolve));
  return code;
}
const linkLocal = await listenError("fe80::1");

describe("flag-webhooks dev, when it ends with an error", () => {
  it("reports the API's refusal of the --forward webhook in its words, closes the emulator and leaves no signal handler", async () => {
    // The emulator's API takes request bodies up to 1 MiB; --forward has no length limit of its
    // own, so a URL longer than that is the API's to refuse, after the emulator started.
    const port = await freePort();
    const url = `https://example.com/${"a".repeat(1024 * 1024)}`;
    const run = dev(["--port", String(port), "--forward", url]);
    await expectUsageError(run, "--forward: the request body is larger than 1 MiB");
    expect(process.listenerCount("SIGINT") + process.listenerCount("SIGTERM")).toBe(0);
    // Closed: its port is free again.
    expect(await canListen(port)).toBe(true);
  });

  it.runIf(linkLocal === "EINVAL")(
    "refuses --host with an IPv6 link-local address (Node cannot listen on it without a zone) as a usage mistake",
    async () => {
      await expectUsageError(
        dev(["--port", "0", "--host", "fe80::1"]),
        "--host fe80::1 is not an address of this machine",
      );
      expect(process.listenerCount("SIGINT")).toBe(0);
    },
  );

  it("reports a --state path as typed, even one with --token in it, when the token comes from the environment", async () => {
    const dir = mkdtempSync(join(tmpdir(), "flag-webhooks-dev-small-"));
    dirs.push(dir);
    const file = join(dir, "keep--token", "dev.json");
    await expectUsageError(
      dev(["--port", "0", "--state", file], { FLAG_WEBHOOKS_EMULATOR_TOKEN: "env-token-456" }),
      `--state: cannot read the state file ${file}: its folder ${join(dir, "keep--token")} does not exist`,
    );
  });
});
