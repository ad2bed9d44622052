import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable, Writable } from "node:stream";
import { afterAll, beforeAll, expect } from "vitest";
import type { Command } from "../../src/cli/command.js";
import { main } from "../../src/cli/main.js";
import { signatureOf } from "./deliveries.js";

// The `flag-webhooks` command run in-process: main() with the process's environment and streams
// replaced by real Node streams, the way bin.ts calls it (the installed binary itself:
// test/cli/installed.test.ts). From src/, so that mutation testing sees it.

export const SECRET = "cli-test-secret-7f3a9c";
export const withSecret = { env: { FLAG_WEBHOOKS_SECRET: SECRET } };

/** The Service-Signature of `body` under `secret`, by the core's sign() (checked against openssl). */
export const hmac = (body: string | Buffer, secret = SECRET) => signatureOf(secret, body);

export interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function sink(): { stream: Writable; text: () => string } {
  const chunks: Buffer[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      chunks.push(Buffer.from(chunk));
      done();
    },
  });
  return { stream, text: () => Buffer.concat(chunks).toString("utf8") };
}

/** Runs the command with `args`, an environment of `env` alone, `input` as stdin and, if given, other commands. */
export async function run(
  args: string[],
  options: { env?: Record<string, string>; input?: string | Buffer | Readable; commands?: Command[] } = {},
): Promise<Run> {
  const stdout = sink();
  const stderr = sink();
  const input = options.input;
  const stdin = input instanceof Readable ? input : Readable.from(input === undefined ? [] : [Buffer.from(input)]);
  const code = await main(
    args,
    { env: { ...options.env }, stdin, stdout: stdout.stream, stderr: stderr.stream },
    options.commands,
  );
  return { code, stdout: stdout.text(), stderr: stderr.text() };
}

/** An error as the command must print it: one line; for a usage error (2), a hint to the help. */
export function expectOneLineError(result: Run, code: 1 | 2, message: string, command?: string) {
  expect(result.code).toBe(code);
  const lines = result.stderr.trimEnd().split("\n");
  expect(lines[0]).toBe(`flag-webhooks: ${message}`);
  if (code === 2) {
    expect(lines).toEqual([
      `flag-webhooks: ${message}`,
      `Run "flag-webhooks${command ? ` ${command}` : ""} --help" for usage.`,
    ]);
  } else expect(lines).toHaveLength(1);
  expect(result.stderr.endsWith("\n")).toBe(true);
}

/**
 * A temporary folder for the test file's bodies, made before its tests and removed after them:
 * `dir()` is its path, `file(name, content)` writes a file there and returns its path.
 */
export function bodyFiles(): { dir: () => string; file: (name: string, content: string | Buffer) => string } {
  let dir = "";
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "flag-webhooks-cli-src-"));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  return {
    dir: () => dir,
    file(name, content) {
      const path = join(dir, name);
      writeFileSync(path, content);
      return path;
    },
  };
}
