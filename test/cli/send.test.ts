import type { Server } from "node:http";
import { createServer as createNetServer } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bodyFiles, expectOneLineError, hmac, run, SECRET, withSecret } from "../support/cli.js";
import { urlOf } from "../support/http.js";
import { type SendTargets, startSendTargets } from "../support/send-targets.js";

// `flag-webhooks send`, in-process, against real receivers on loopback: the Express example, a
// recorder that answers as told and keeps the last request's bytes and headers, one that never
// answers, and a port nothing listens on.

const { dir, file } = bodyFiles();
let targets: SendTargets;
let receiver: Server;
let recorder: Server;
let silent: Server;
let closedPort: number;

beforeAll(async () => {
  targets = await startSendTargets(SECRET);
  ({ receiver, recorder, silent, closedPort } = targets);
});

afterAll(async () => {
  await targets?.close();
});

describe("send", () => {
  it("sends a fresh signed flag.updated event that the Express example accepts", async () => {
    const url = urlOf(receiver);
    const result = await run(["send", url], withSecret);
    const [sent, answered, reply, rest] = result.stdout.split("\n");
    const match = /^--> flag\.updated \[(evt_[0-9a-f]{32})\] (\d+) bytes, signed$/.exec(sent ?? "");
    expect(match, result.stdout).not.toBeNull();
    expect(answered).toBe(`<-- [200 OK] POST ${url}`);
    expect(JSON.parse(reply ?? "").received).toBe(match?.[1]);
    expect(rest).toBe("");
    expect([result.code, result.stderr]).toEqual([0, ""]);
  });

  it.each(["flag.updated", "flag.created", "flag.deleted", "rollout.step", "rollout.guard_triggered"])(
    "sends a signed %s event with the service's headers",
    async (type) => {
      targets.answer = { status: 202, body: "recorded" };
      const url = urlOf(recorder, "/hook?x=1");
      const result = await run(["send", url, "-t", type], withSecret);
      expect(result.code).toBe(0);
      const event = JSON.parse(targets.recorded?.body.toString("utf8") ?? "");
      expect(event.type).toBe(type);
      expect(result.stdout).toBe(
        `--> ${type} [${event.id}] ${targets.recorded?.body.length} bytes, signed\n<-- [202 Accepted] POST ${url}\nrecorded\n`,
      );
      expect(targets.recorded?.headers).toMatchObject({
        "service-signature": await hmac(targets.recorded?.body ?? ""),
        "content-type": "application/json",
        "user-agent": "flag-webhooks/0.0.0-dev",
      });
    },
  );

  it("sends a file's or stdin's exact bytes", async () => {
    targets.answer = { status: 200, body: "fine\n" };
    const body = '{\n  "id": "evt_pretty", "n": 1.0\n}\n';
    const path = file("event.json", body);
    const url = urlOf(recorder);
    expect(await run(["send", url, "--file", path], withSecret)).toEqual({
      code: 0,
      stdout: `--> ${path}: ${Buffer.byteLength(body)} bytes, signed\n<-- [200 OK] POST ${url}\nfine\n`,
      stderr: "",
    });
    expect(targets.recorded?.body.toString("utf8")).toBe(body);
    expect(targets.recorded?.headers["service-signature"]).toBe(await hmac(body));
    const fromStdin = await run(["send", url, "-f", "-"], { ...withSecret, input: body });
    expect(fromStdin.stdout.split("\n")[0]).toBe(`--> stdin: ${Buffer.byteLength(body)} bytes, signed`);
    expect(targets.recorded?.body.toString("utf8")).toBe(body);
  });

  it("prints no body line for an empty answer, and exits 1 for a status that is not 2xx", async () => {
    targets.answer = { status: 204, body: "" };
    const url = urlOf(recorder);
    const ok = await run(["send", url], withSecret);
    expect(ok.stdout.split("\n").slice(1)).toEqual([`<-- [204 No Content] POST ${url}`, ""]);
    expect(ok.code).toBe(0);
    targets.answer = { status: 500, body: "boom" };
    const failed = await run(["send", url], withSecret);
    expect(failed.stdout.split("\n").slice(1)).toEqual([`<-- [500 Internal Server Error] POST ${url}`, "boom", ""]);
    expect([failed.code, failed.stderr]).toEqual([1, ""]);
    targets.answer = { status: 299, body: "odd", reason: "" };
    const unnamed = await run(["send", url], withSecret);
    expect(unnamed.stdout.split("\n")[1]).toBe(`<-- [299] POST ${url}`);
    expect(unnamed.code).toBe(0);
    targets.answer = { status: 199 + 101, body: "" };
    expect((await run(["send", url], withSecret)).code).toBe(1);
  });

  it("prints where a redirect points, resolved against the URL, and does not follow it", async () => {
    const url = urlOf(recorder);
    targets.answer = { status: 308, body: "moved", headers: { location: "/v2/webhooks" } };
    const moved = await run(["send", url], withSecret);
    expect(moved.stdout.split("\n").slice(1)).toEqual([
      `<-- [308 Permanent Redirect] POST ${url}`,
      `<-- Location: ${urlOf(recorder, "/v2/webhooks")} (not followed: the service posts only to the registered URL)`,
      "moved",
      "",
    ]);
    expect(moved.code).toBe(1);
    targets.answer = { status: 300, body: "", headers: { location: "http://[bad" } };
    expect((await run(["send", url], withSecret)).stdout.split("\n")[2]).toBe(
      "<-- Location: http://[bad (not followed: the service posts only to the registered URL)",
    );
    targets.answer = { status: 399, body: "", headers: { location: "/x" } };
    expect((await run(["send", url], withSecret)).stdout).toContain(`<-- Location: ${urlOf(recorder, "/x")}`);
    // A redirect without a Location prints none.
    targets.answer = { status: 300, body: "" };
    expect((await run(["send", url], withSecret)).stdout).not.toContain("Location");
    // A Location on an answer that is not a redirect is not one.
    for (const status of [201, 400]) {
      targets.answer = { status, body: "", headers: { location: "/elsewhere" } };
      expect((await run(["send", url], withSecret)).stdout).not.toContain("Location");
    }
  });

  describe("sending an event again", () => {
    const duplicateLine = "<-- Webhook-Duplicate: true (the receiver had handled this event id already)";

    it("--repeat sends the same signed bytes again, and a receiver that dedupes answers the copy as a duplicate", async () => {
      const url = urlOf(targets.deduping, "/webhooks");
      const result = await run(["send", url, "--repeat", "3"], withSecret);
      const id = /\[(evt_[0-9a-f]{32})\]/.exec(result.stdout)?.[1];
      expect(result.stdout).toBe(
        [
          `--> flag.updated [${id}] ${result.stdout.match(/ (\d+) bytes/)?.[1]} bytes, signed`,
          `<-- [200 OK] POST ${url}`,
          JSON.stringify({ received: id }),
          "--> the same delivery again (2 of 3): the same bytes and signature",
          `<-- [204 No Content] POST ${url}`,
          duplicateLine,
          "--> the same delivery again (3 of 3): the same bytes and signature",
          `<-- [204 No Content] POST ${url}`,
          duplicateLine,
          "",
        ].join("\n"),
      );
      expect([result.code, result.stderr]).toEqual([0, ""]);
      expect(targets.handled.filter((handled) => handled === id)).toEqual([id]);
    });

    it("--id gives the generated event its id, so a later run sends the same event again", async () => {
      const url = urlOf(targets.deduping, "/webhooks");
      const id = `evt_send_again_${Date.now()}`;
      const first = await run(["send", url, "--id", id, "-t", "flag.created"], withSecret);
      expect(first.stdout.split("\n").slice(0, 3)).toEqual([
        expect.stringMatching(new RegExp(`^--> flag\\.created \\[${id}\\] \\d+ bytes, signed$`)),
        `<-- [200 OK] POST ${url}`,
        JSON.stringify({ received: id }),
      ]);
      const again = await run(["send", url, "--id", id, "-t", "flag.created"], withSecret);
      expect(again.stdout.split("\n").slice(1)).toEqual([`<-- [204 No Content] POST ${url}`, duplicateLine, ""]);
      expect(again.code).toBe(0);
      expect(targets.handled.filter((handled) => handled === id)).toEqual([id]);
    });

    it("--repeat sends a file's exact bytes each time, and exits 1 when any answer is not 2xx", async () => {
      targets.answer = { status: 503, body: "busy" };
      const body = '{"id":"evt_file_again"}\n';
      const url = urlOf(recorder);
      const result = await run(["send", url, "-f", file("again.json", body), "-n", "2"], withSecret);
      expect(result.stdout.split("\n").slice(1)).toEqual([
        `<-- [503 Service Unavailable] POST ${url}`,
        "busy",
        "--> the same delivery again (2 of 2): the same bytes and signature",
        `<-- [503 Service Unavailable] POST ${url}`,
        "busy",
        "",
      ]);
      expect(result.code).toBe(1);
      expect(targets.recorded?.body.toString("utf8")).toBe(body);
      expect(targets.recorded?.headers["service-signature"]).toBe(await hmac(body));
      targets.answer = { status: 200, body: "" };
      expect((await run(["send", url, "--repeat=2"], withSecret)).code).toBe(0);
    });

    it("-i prints every header of each answer, as curl -i does, Webhook-Duplicate among them", async () => {
      targets.answer = { status: 202, body: "noted", headers: { "x-request-id": "abc-1", "retry-after": "10" } };
      const url = urlOf(recorder);
      const lines = (await run(["send", url, "-i"], withSecret)).stdout.split("\n");
      expect(lines[1]).toBe(`<-- [202 Accepted] POST ${url}`);
      const headers = lines.slice(2, lines.indexOf("noted"));
      expect(headers).toEqual(expect.arrayContaining(["<-- x-request-id: abc-1", "<-- retry-after: 10"]));
      expect(headers).toContain("<-- content-type: text/plain");
      for (const line of headers) expect(line).toMatch(/^<-- [a-z-]+: /);
      const deduping = urlOf(targets.deduping, "/webhooks");
      const copy = (await run(["send", deduping, "-i", "--repeat", "2"], withSecret)).stdout.split("\n");
      const again = copy.indexOf("--> the same delivery again (2 of 2): the same bytes and signature");
      expect(copy[again + 1]).toBe(`<-- [204 No Content] POST ${deduping}`);
      expect(copy.slice(again + 2)).toContain("<-- webhook-duplicate: true");
      // The headers say it already: no second line for it.
      expect(copy).not.toContain(duplicateLine);
    });
  });

  it("--tamper changes one byte after signing, so the receiver refuses it for the signature", async () => {
    const result = await run(["send", urlOf(receiver), "--tamper"], withSecret);
    const [sent, answered, reply] = result.stdout.split("\n");
    const match =
      /^--> flag\.updated \[evt_\w+\] \d+ bytes, signed, then byte (\d+) changed from "(\d)" to "(\d)"$/.exec(
        sent ?? "",
      );
    expect(match, sent).not.toBeNull();
    expect(Number(match?.[3])).toBe((Number(match?.[2]) + 1) % 10);
    expect(answered).toBe(`<-- [401 Unauthorized] POST ${urlOf(receiver)}`);
    expect(JSON.parse(reply ?? "").error.code).toBe("invalid_signature");
    expect([result.code, result.stderr]).toEqual([1, ""]);
  });

  it.each([
    ['{"n":1,"m":9}', '{"n":1,"m":0}', 'byte 11 changed from "9" to "0"'],
    ['{"n":"0a"}', '{"n":"1a"}', 'byte 6 changed from "0" to "1"'],
    ['{"name":"ab"}', '{"name":"aB"}', 'byte 10 changed from "b" to "B"'],
    ['{"N":"Z"}', '{"N":"z"}', 'byte 6 changed from "Z" to "z"'],
    ['{"a":"@["}', '{"A":"@["}', 'byte 2 changed from "a" to "A"'],
    ["{}", "{|", 'byte 1 changed from "}" to "|"'],
    ["[]\n", "[]\u000b", "byte 2 changed from 0xa to 0xb"],
    ["  ", " !", 'byte 1 changed from 0x20 to "!"'],
    ["~", "\u007f", 'byte 0 changed from "~" to 0x7f'],
    ["", " ", "a space added"],
    ["7", "8", 'byte 0 changed from "7" to "8"'],
    ["a", "A", 'byte 0 changed from "a" to "A"'],
    ["\u007f", "~", 'byte 0 changed from 0x7f to "~"'],
  ])("--tamper on %j sends %j (%s), signed as the original", async (original, tampered, description) => {
    targets.answer = { status: 202, body: "" };
    const path = file("tamper.json", original);
    const result = await run(["send", urlOf(recorder), "-f", path, "--tamper"], withSecret);
    // The whole description, the byte before included: a file's body is a Buffer, whose slice()
    // did not copy, so the line once showed the new byte twice.
    const line = result.stdout.split("\n")[0] ?? "";
    expect(line).toBe(`--> ${path}: ${Buffer.byteLength(tampered)} bytes, signed, then ${description}`);
    expect(targets.recorded?.body.toString("latin1")).toBe(tampered);
    expect(targets.recorded?.headers["service-signature"]).toBe(await hmac(original));
  });

  it("refuses its usage mistakes before sending anything", async () => {
    const cases: [string[], string][] = [
      [["send"], "missing <url>, e.g. http://localhost:3000/webhooks"],
      [["send", "http://127.0.0.1/", "http://127.0.0.2/"], "expected one <url>, got 2 arguments"],
      [["send", "localhost:3000"], 'invalid URL "localhost:3000": only http:// and https:// are supported'],
      [["send", "ftp://127.0.0.1/"], 'invalid URL "ftp://127.0.0.1/": only http:// and https:// are supported'],
      [["send", "not a url"], 'invalid URL "not a url", expected e.g. http://localhost:3000/webhooks'],
      [
        ["send", "http://127.0.0.1/", "--type", "flag.archived"],
        'unknown event type "flag.archived"; use one of flag.updated, flag.created, flag.deleted, rollout.step, rollout.guard_triggered',
      ],
      [
        ["send", "http://127.0.0.1/", "--type", "rollout.step", "-f", "x.json"],
        "--type and --file cannot be used together: the file is sent as it is",
      ],
      [
        ["send", "http://127.0.0.1/", "--timeout", "soon"],
        '--timeout must be a positive number of seconds, got "soon"',
      ],
      [["send", "http://127.0.0.1/", "--timeout", "0"], '--timeout must be a positive number of seconds, got "0"'],
      [["send", "http://127.0.0.1/", "--repeat", "0"], '--repeat must be a whole number from 1 to 100, got "0"'],
      [["send", "http://127.0.0.1/", "-n", "101"], '--repeat must be a whole number from 1 to 100, got "101"'],
      [["send", "http://127.0.0.1/", "--repeat", "2x"], '--repeat must be a whole number from 1 to 100, got "2x"'],
      [["send", "http://127.0.0.1/", "--repeat=1.5"], '--repeat must be a whole number from 1 to 100, got "1.5"'],
      [
        ["send", "http://127.0.0.1/", "--id", "evt_1", "-f", "x.json"],
        "--id and --file cannot be used together: the file's event has its own id",
      ],
      [["send", "http://127.0.0.1/", "--id="], "--id must not be empty"],
      [["send", "http://127.0.0.1/", "--timeout=-1"], '--timeout must be a positive number of seconds, got "-1"'],
      [
        ["send", "http://127.0.0.1/", "--timeout", "Infinity"],
        '--timeout must be a positive number of seconds, got "Infinity"',
      ],
    ];
    for (const [args, message] of cases) {
      targets.recorded = undefined;
      const result = await run(args, withSecret);
      expectOneLineError(result, 2, message, "send");
      expect(result.stdout).toBe("");
    }
    expectOneLineError(
      await run(["send", urlOf(recorder)]),
      2,
      "no secret: pass --secret <secret> or set FLAG_WEBHOOKS_SECRET",
      "send",
    );
    expect(targets.recorded).toBeUndefined();
    expect(
      (await run(["send", urlOf(recorder), "--type", "flag.updated", "-f", file("ok.json", "{}")], withSecret)).code,
    ).toBe(0);
    expectOneLineError(
      await run(["send", urlOf(recorder), "-f", join(dir(), "missing.json")], withSecret),
      1,
      `cannot read ${dir()}/missing.json: no such file`,
    );
  });

  describe("says in one line why no answer came", () => {
    it("nothing listens", async () => {
      const url = `http://127.0.0.1:${closedPort}/webhooks`;
      const result = await run(["send", url], withSecret);
      expectOneLineError(
        result,
        1,
        `could not reach ${url}: connection refused (is your receiver running on port ${closedPort}?)`,
      );
      expect(result.stdout).toMatch(/^--> flag\.updated \[evt_\w+\] \d+ bytes, signed\n$/);
      const https = `https://127.0.0.1:${closedPort}/`;
      expectOneLineError(
        await run(["send", https], withSecret),
        1,
        `could not reach ${https}: connection refused (is your receiver running on port ${closedPort}?)`,
      );
    });

    it("the default ports", async () => {
      // Port 80 and 443 on loopback: nothing listens there in the tests.
      expectOneLineError(
        await run(["send", "http://127.0.0.1/"], withSecret),
        1,
        "could not reach http://127.0.0.1/: connection refused (is your receiver running on port 80?)",
      );
      expectOneLineError(
        await run(["send", "https://127.0.0.1/x"], withSecret),
        1,
        "could not reach https://127.0.0.1/x: connection refused (is your receiver running on port 443?)",
      );
    });

    it("the receiver is silent past --timeout", async () => {
      const url = urlOf(silent);
      expectOneLineError(
        await run(["send", url, "--timeout", "0.2"], withSecret),
        1,
        `no answer from ${url} within 0.2 s`,
      );
    });

    it("the host does not exist", async () => {
      expectOneLineError(
        await run(["send", "http://no-such-host.invalid:8080/hook"], withSecret),
        1,
        "could not reach http://no-such-host.invalid:8080/hook: host no-such-host.invalid not found",
      );
    });

    it("the host is unreachable: the system's reason, which names its code already", async () => {
      // 2001:db8::/32 is for documentation: no route leads there, so on this machine the connect
      // fails at once with the system's reason. A network that silently drops the packets instead
      // gives the timeout's message: either way one line, exit 1.
      const url = "http://[2001:db8::1]:81/";
      const result = await run(["send", url, "--timeout", "2"], withSecret);
      expect(result.code).toBe(1);
      expect(result.stderr).toMatch(
        /^flag-webhooks: (could not reach http:\/\/\[2001:db8::1\]:81\/: connect (E[A-Z]+) 2001:db8::1:81|no answer from http:\/\/\[2001:db8::1\]:81\/ within 2 s)\n$/,
      );
    });

    it("refuses a URL with credentials before sending, and never prints the password", async () => {
      const result = await run(["send", "http://user:pw-secret@127.0.0.1:1/"], withSecret);
      expectOneLineError(result, 2, "<url> must not contain credentials", "send");
      expect(result.stderr + result.stdout).not.toContain("pw-secret");
    });

    it("fetch refuses the port", async () => {
      expectOneLineError(
        await run(["send", "http://127.0.0.1:6000/"], withSecret),
        1,
        "could not reach http://127.0.0.1:6000/: fetch refuses port 6000 (a port browsers block); use another port",
      );
    });

    it("the connection closes before an answer, or the answer is not HTTP", async () => {
      const dropping = createNetServer((socket) => socket.once("data", () => socket.destroy()));
      const resetting = createNetServer((socket) => socket.once("data", () => socket.resetAndDestroy()));
      const garbage = createNetServer((socket) => socket.once("data", () => socket.end("NOT HTTP AT ALL\r\n\r\n")));
      await Promise.all(
        [dropping, resetting, garbage].map(
          (server) => new Promise<void>((done) => server.listen(0, "127.0.0.1", done)),
        ),
      );
      try {
        const a = urlOf(dropping);
        expectOneLineError(
          await run(["send", a], withSecret),
          1,
          `could not reach ${a}: the connection closed before an answer`,
        );
        const reset = urlOf(resetting);
        expectOneLineError(
          await run(["send", reset], withSecret),
          1,
          `could not reach ${reset}: the connection closed before an answer`,
        );
        const b = urlOf(garbage);
        expectOneLineError(await run(["send", b], withSecret), 1, `could not reach ${b}: the answer is not HTTP/1.1`);
        // TLS to a plain HTTP server: the TLS library's reason, followed by its code.
        // (OpenSSL's reason ends in a newline, which makes this error two lines: reported separately.)
        const c = urlOf(recorder).replace("http:", "https:");
        const tls = await run(["send", c], withSecret);
        expect(tls.code).toBe(1);
        expect(tls.stderr.startsWith(`flag-webhooks: could not reach ${c}: `)).toBe(true);
        expect(tls.stderr).toMatch(/wrong version number[\s\S]* \(ERR_SSL_WRONG_VERSION_NUMBER\)\n$/);
      } finally {
        await Promise.all([dropping, resetting, garbage].map((server) => new Promise((done) => server.close(done))));
      }
    });
  });
});
