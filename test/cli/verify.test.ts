import { Readable } from "node:stream";
import { describe, expect, it } from "vitest";
import { bodyFiles, expectOneLineError, hmac, run, withSecret } from "../support/cli.js";

// `flag-webhooks verify`, in-process: a body checked against a signature, and why a malformed
// signature can never verify.

const { file } = bodyFiles();

describe("verify", () => {
  const body = '{"id":"evt_1"}';

  it('prints "ok" for the right signature, from a file or stdin', async () => {
    const path = file("verify.json", body);
    expect(await run(["verify", "--signature", await hmac(body), path], withSecret)).toEqual({
      code: 0,
      stdout: "ok\n",
      stderr: "",
    });
    expect(await run(["verify", "-s", await hmac(body)], { ...withSecret, input: body })).toEqual({
      code: 0,
      stdout: "ok\n",
      stderr: "",
    });
  });

  it("exits 1 in one line when the body or the secret differs", async () => {
    const path = file("verify2.json", body);
    expectOneLineError(
      await run(["verify", "-s", await hmac(body), "-"], { ...withSecret, input: `${body} ` }),
      1,
      "signature does not match: the body from stdin or the secret differs",
    );
    expectOneLineError(
      await run(["verify", "-s", await hmac(body), "--secret", "wrong-secret", path]),
      1,
      `signature does not match: the body from ${path} or the secret differs`,
    );
  });

  it("explains why a malformed signature can never verify, before reading the body", async () => {
    const s = await hmac(body);
    const input = new Readable({
      read() {
        throw new Error("the body must not be read");
      },
    });
    const cases: [string, string][] = [
      [
        s.toUpperCase(),
        "signature has uppercase letters: the service sends lowercase hex and receivers compare exactly",
      ],
      [`sha256=${s}`, 'signature has a "sha256=" prefix: the service sends the bare hex digest'],
      [`SHA256=${s}`, 'signature has a "sha256=" prefix: the service sends the bare hex digest'],
      [s.slice(0, 63), "signature must be 64 lowercase hex characters, got 63 characters"],
      [`${s}0`, "signature must be 64 lowercase hex characters, got 65 characters"],
      [`x${s}`, "signature must be 64 lowercase hex characters, got 65 characters"],
      [`x-sha256=${s}`, "signature must be 64 lowercase hex characters, got 73 characters"],
      [`${s.slice(0, 63)}g`, "signature must be 64 lowercase hex characters, got 64 characters"],
      [
        `${s.slice(0, 63)}A`.replace(/[a-f]/g, "A"),
        "signature has uppercase letters: the service sends lowercase hex and receivers compare exactly",
      ],
    ];
    for (const [signature, message] of cases) {
      expectOneLineError(await run(["verify", "-s", signature], { ...withSecret, input }), 1, message);
    }
  });

  it("needs --signature and at most one file, and a secret", async () => {
    expectOneLineError(await run(["verify", "x.json"], withSecret), 2, "missing --signature <hex>", "verify");
    expectOneLineError(
      await run(["verify", "-s", await hmac(body), "a", "b"], withSecret),
      2,
      "expected at most one file, got 2",
      "verify",
    );
    expectOneLineError(
      await run(["verify", "-s", await hmac(body)]),
      2,
      "no secret: pass --secret <secret> or set FLAG_WEBHOOKS_SECRET",
      "verify",
    );
  });
});
