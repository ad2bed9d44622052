import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { Readable } from "node:stream";
import { describe, expect, it } from "vitest";
import { bodyFiles, expectOneLineError, hmac, run, withSecret } from "../support/cli.js";

// `flag-webhooks sign`, in-process: the signature of a file's or stdin's exact bytes.

const { dir, file } = bodyFiles();

describe("sign", () => {
  it("prints the HMAC of a file's exact bytes; --secret wins over the environment", async () => {
    const body = '{ "a": "caf\u00e9" }\n';
    const path = file("sign.json", body);
    expect(await run(["sign", path], withSecret)).toEqual({ code: 0, stdout: `${await hmac(body)}\n`, stderr: "" });
    expect((await run(["sign", "--secret", "another-secret", path], withSecret)).stdout).toBe(
      `${await hmac(body, "another-secret")}\n`,
    );
  });

  it("reads stdin for - or no file, in bytes or text chunks, and notes an empty body", async () => {
    expect((await run(["sign", "-"], { ...withSecret, input: "abc" })).stdout).toBe(`${await hmac("abc")}\n`);
    expect((await run(["sign"], { ...withSecret, input: Readable.from(["ab", "c"]) })).stdout).toBe(
      `${await hmac("abc")}\n`,
    );
    expect(await run(["sign"], withSecret)).toEqual({
      code: 0,
      stdout: `${await hmac("")}\n`,
      stderr: "Note: the body from stdin is empty.\n",
    });
    expect((await run(["sign", file("empty.json", "")], withSecret)).stderr).toBe(
      `Note: the body from ${dir()}/empty.json is empty.\n`,
    );
  });

  it("tells a terminal user how to end stdin", async () => {
    const tty = Object.assign(Readable.from([Buffer.from("abc")]), { isTTY: true });
    expect(await run(["sign"], { ...withSecret, input: tty })).toEqual({
      code: 0,
      stdout: `${await hmac("abc")}\n`,
      stderr: "Reading the body from stdin; end it with Ctrl-D.\n",
    });
  });

  it("says why a file or stdin cannot be read", async () => {
    mkdirSync(join(dir(), "a-directory"), { recursive: true });
    const plain = file("plain.txt", "x");
    expectOneLineError(
      await run(["sign", join(dir(), "missing.json")], withSecret),
      1,
      `cannot read ${dir()}/missing.json: no such file`,
    );
    expectOneLineError(
      await run(["sign", join(dir(), "a-directory")], withSecret),
      1,
      `cannot read ${dir()}/a-directory: it is a directory`,
    );
    expectOneLineError(
      await run(["sign", `${plain}/x`], withSecret),
      1,
      `cannot read ${plain}/x: a part of the path is not a directory`,
    );
    const long = join(dir(), "n".repeat(300));
    expectOneLineError(await run(["sign", long], withSecret), 1, `cannot read ${long}: the name is too long`);
    // A reason without a code of its own is node's message.
    const nul = await run(["sign", "a\0b"], withSecret);
    expect(nul.code).toBe(1);
    expect(nul.stderr).toMatch(
      /^flag-webhooks: cannot read a\\x00b: The argument 'path' must be a string.*without null bytes/,
    );
    const failing = new Readable({
      read() {
        this.destroy(new Error("stream broke"));
      },
    });
    expectOneLineError(await run(["sign"], { ...withSecret, input: failing }), 1, "cannot read stdin: stream broke");
  });

  it("takes at most one file", async () => {
    expectOneLineError(await run(["sign", "a", "b"], withSecret), 2, "expected at most one file, got 2", "sign");
  });
});
