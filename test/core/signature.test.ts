import { createHmac } from "node:crypto";
import { verifySignature } from "flag-webhooks";
import { afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { backends } from "../support/backends.js";
import { vector, vectors } from "../support/vectors.js";

const compact = vector("flag-updated-compact");
// Node's own HMAC, independent of the package, for signatures of bodies the vectors do not hold.
const mac = (secret: string, body: string | Uint8Array) => createHmac("sha256", secret).update(body).digest("hex");

describe.each(backends)("signatures on $name", ({ name, load }) => {
  let core: Awaited<ReturnType<typeof load>>;
  beforeAll(async () => {
    core = await load();
  });
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it.each(vectors)("signs $name exactly as openssl does", async ({ secret, body, signature }) => {
    expect(await core.sign({ secret, payload: body })).toBe(signature);
  });

  it.each(vectors)("verifies the openssl signature of $name", async ({ secret, body, signature }) => {
    expect(await core.verifySignature({ secret, payload: body, signature })).toBe(true);
  });

  it("uses the HMAC implementation this runtime should use", async () => {
    const subtleVerify = vi.spyOn(crypto.subtle, "verify");
    await core.verifySignature({ secret: compact.secret, payload: compact.body, signature: compact.signature });
    expect(subtleVerify).toHaveBeenCalledTimes(name === "Web Crypto" ? 1 : 0);
  });

  it("accepts the body as a string, Buffer, Uint8Array view, ArrayBuffer and DataView", async () => {
    const { secret, signature, body } = compact;
    const padded = new Uint8Array(body.length + 10);
    padded.set(body, 5);
    const view = padded.subarray(5, 5 + body.length);
    const arrayBuffer = new Uint8Array(body).buffer;
    for (const payload of [
      body.toString("utf8"),
      body,
      view,
      arrayBuffer,
      new DataView(padded.buffer, 5, body.length),
    ]) {
      expect(await core.verifySignature({ secret, payload, signature })).toBe(true);
      expect(await core.sign({ secret, payload })).toBe(signature);
    }
  });

  it("treats a string payload as its UTF-8 bytes", async () => {
    const v = vector("unicode-raw");
    expect(await core.sign({ secret: v.secret, payload: v.body.toString("utf8") })).toBe(v.signature);
  });

  it("tells raw and escaped unicode apart: they are different bytes", async () => {
    const raw = vector("unicode-raw");
    const escaped = vector("unicode-escaped");
    expect(await core.verifySignature({ secret: raw.secret, payload: escaped.body, signature: raw.signature })).toBe(
      false,
    );
  });

  it("tells pretty and compact JSON of the same event apart", async () => {
    const pretty = vector("flag-updated-pretty");
    expect(
      await core.verifySignature({ secret: pretty.secret, payload: compact.body, signature: pretty.signature }),
    ).toBe(false);
  });

  const malformed: [string, unknown][] = [
    ["uppercase hex", compact.signature.toUpperCase()],
    ["a sha256= prefix", `sha256=${compact.signature}`],
    ["a leading space", ` ${compact.signature}`],
    ["a trailing space", `${compact.signature} `],
    ["a trailing newline", `${compact.signature}\n`],
    ["trailing characters", `${compact.signature}00`],
    ["a trailing non-hex character", `${compact.signature}z`],
    ["a truncated digest", compact.signature.slice(0, 63)],
    ["half the digest", compact.signature.slice(0, 32)],
    ["a non-hex character inside", `${compact.signature.slice(0, 10)}g${compact.signature.slice(11)}`],
    ["hex of the right length decoding to the same prefix", `${compact.signature.slice(0, 62)}zz`],
    ["an empty string", ""],
    ["base64 of the digest", Buffer.from(compact.signature, "hex").toString("base64")],
    ["the digest twice, comma-joined as Node joins repeated headers", `${compact.signature}, ${compact.signature}`],
    ["a repeated header given as an array, both copies right", [compact.signature, compact.signature]],
    ["a one-element array", [compact.signature]],
    ["null", null],
    ["undefined", undefined],
    ["a number", 42],
    ["an object", { toString: () => compact.signature }],
    ["a signature made with another secret", "0".repeat(64)],
  ];

  it.each(malformed)("rejects a signature with %s, without throwing", async (_, signature) => {
    const result = await core.verifySignature({
      secret: compact.secret,
      payload: compact.body,
      signature: signature as string,
    });
    expect(result).toBe(false);
  });

  it("rejects a tampered body", async () => {
    const tampered = Buffer.from(compact.body);
    tampered.writeUInt8(tampered.readUInt8(tampered.length - 3) ^ 1, tampered.length - 3);
    expect(
      await core.verifySignature({ secret: compact.secret, payload: tampered, signature: compact.signature }),
    ).toBe(false);
  });

  it("rejects a signature made with another secret", async () => {
    expect(await core.verifySignature({ secret: "other", payload: compact.body, signature: compact.signature })).toBe(
      false,
    );
  });

  it("accepts a delivery signed with any secret of a rotation list, in any position", async () => {
    const { secret, body, signature } = compact;
    for (const list of [
      [secret, "old"],
      ["new", secret],
      ["a", "b", secret],
    ]) {
      expect(await core.verifySignature({ secret: list, payload: body, signature })).toBe(true);
    }
    expect(await core.verifySignature({ secret: ["a", "b"], payload: body, signature })).toBe(false);
  });

  it.each([
    ["an empty string", ""],
    ["an empty list", []],
    ["a list with an empty string", ["ok", ""]],
    ["a list with a number", ["ok", 42]],
    ["undefined", undefined],
    ["a number", 7],
  ])("throws a TypeError naming the option when the secret is %s", async (_, secret) => {
    const call = core.verifySignature({
      secret: secret as string,
      payload: compact.body,
      signature: compact.signature,
    });
    await expect(call).rejects.toThrow(TypeError);
    await expect(call).rejects.toThrow(/"secret"/);
    await expect(core.sign({ secret: secret as string, payload: "x" })).rejects.toThrow(/"secret"/);
  });

  it("refuses a parsed object as payload with a hint about body parsers, and never echoes the secret", async () => {
    const call = core.verifySignature({
      secret: "top-secret-value",
      payload: JSON.parse(compact.body.toString()) as never,
      signature: compact.signature,
    });
    await expect(call).rejects.toThrow(/"payload" must be the raw body as a string or bytes, got a parsed object/);
    // The hint the README promises: what to use instead, framework by framework.
    await expect(call).rejects.toThrow(/express\.raw\(\{ type: "\*\/\*" \}\)/);
    await expect(call).rejects.toThrow(/request\.text\(\)/);
    await expect(call).rejects.toThrow(/rawBody: true/);
    await expect(call).rejects.not.toThrow(/top-secret-value/);
  });

  it("round-trips sign and verify for a 1 MiB body", async () => {
    const big = vector("one-mib-of-a");
    const signature = await core.sign({ secret: "k", payload: big.body });
    expect(await core.verifySignature({ secret: "k", payload: big.body, signature })).toBe(true);
  });

  it("prepares each secret's key once and keeps at most 32", async () => {
    const { secret, body, signature } = compact;
    const core = await load(); // a fresh instance: its key cache is empty
    const importKey = vi.spyOn(crypto.subtle, "importKey");
    // The module object the library asked for (an ES namespace cannot be spied on).
    const nodeCrypto = process.getBuiltinModule("node:crypto") as typeof import("node:crypto");
    const createSecretKey = vi.spyOn(nodeCrypto, "createSecretKey");
    // A secret this suite has not used yet, so no earlier test cached it.
    const fresh = `${secret}-cache-${name}`;
    const freshSignature = await core.sign({ secret: fresh, payload: body });
    await core.verifySignature({ secret: fresh, payload: body, signature: freshSignature });
    const prepared = () => (name === "Web Crypto" ? importKey.mock.calls.length : createSecretKey.mock.calls.length);
    expect(prepared()).toBeLessThanOrEqual(1);
    const afterFirst = prepared();
    const verifyFresh = () => core.verifySignature({ secret: fresh, payload: body, signature: freshSignature });
    // 31 more secrets fill the cache to 32: the first one is still cached.
    for (let i = 0; i < 31; i++) await core.verifySignature({ secret: `${fresh}-${i}`, payload: body, signature });
    expect(await verifyFresh()).toBe(true);
    expect(prepared()).toBe(afterFirst + 31);
    // A 33rd secret empties the full cache, so the first one is prepared again, once.
    await core.verifySignature({ secret: `${fresh}-31`, payload: body, signature });
    expect(await verifyFresh()).toBe(true);
    expect(await verifyFresh()).toBe(true);
    expect(prepared()).toBe(afterFirst + 33);
  });

  it("refuses every header that is not exactly 64 lowercase hex characters, whatever its length or alphabet", async () => {
    const body = "payload";
    const right = mac(compact.secret, body);
    const hostile = [
      right.toUpperCase(),
      right.slice(0, 63),
      `${right}0`,
      `${right.slice(0, 63)}é`,
      `${right.slice(0, 63)}٣`, // an Arabic-Indic digit: \d without the u flag is ASCII only
      `${right.slice(0, 63)}\uff10`, // fullwidth zero
      `${right.slice(0, 62)}\u{1F600}`, // 64 UTF-16 units, 63 characters
      "é".repeat(64), // 64 latin1 characters, none hex
      `${right.slice(0, 63)}\n`,
      ` ${right}`,
      `${right}\n`,
      `sha256=${right}`,
      "",
      [right, right],
      [right],
      undefined,
      null,
    ];
    for (const signature of hostile) {
      expect(
        await core.verifySignature({ secret: compact.secret, payload: body, signature }),
        JSON.stringify(signature),
      ).toBe(false);
      expect(await core.verifySignature({ secret: [compact.secret, "x"], payload: body, signature })).toBe(false);
    }
    // And the right one still passes after all of them (nothing stuck in a kept buffer).
    expect(await core.verifySignature({ secret: compact.secret, payload: body, signature: right })).toBe(true);
  });

  it("answers each of many interleaved calls for itself (mixed secrets, payload types, verdicts)", async () => {
    const calls = Array.from({ length: 300 }, (_, i) => {
      const secret = `secret-${i % 7}`;
      const text = `body ${i} ${"x".repeat(i)}`;
      const payload = i % 3 === 0 ? text : i % 3 === 1 ? new TextEncoder().encode(text) : Buffer.from(text);
      const valid = i % 4 !== 0;
      const signature = valid ? mac(secret, text) : mac(secret, `${text}!`);
      const list = i % 2 === 0 ? secret : ["not-it", secret];
      return { promise: core.verifySignature({ secret: list, payload, signature }), valid };
    });
    const results = await Promise.all(calls.map((c) => c.promise));
    expect(results).toEqual(calls.map((c) => c.valid));
  });

  it("rejects, never throws, whatever the options are", async () => {
    const hostile: unknown[] = [
      undefined,
      null,
      42,
      "secret",
      {},
      { secret: compact.secret },
      { secret: compact.secret, payload: { parsed: true }, signature: "a".repeat(64) },
      { secret: [], payload: "x", signature: "a".repeat(64) },
      { secret: ["ok", 1], payload: "x", signature: "a".repeat(64) },
      {
        get secret() {
          throw new Error("a getter that throws");
        },
      },
      new Proxy(
        {},
        {
          get() {
            throw new Error("a proxy that throws");
          },
        },
      ),
    ];
    for (const options of hostile) {
      let result: Promise<boolean> | undefined;
      expect(() => {
        result = core.verifySignature(options as never);
      }).not.toThrow();
      await expect(result).rejects.toThrow();
    }
  });
});

describe("verifySignature keeps no state between calls", () => {
  const SECRET = compact.secret;
  const bytes = new TextEncoder().encode('{"id":"evt_outer"}');

  it("verifies a payload view whose getter runs another verification meanwhile", async () => {
    // A DataView is a valid Payload, and reading its byteOffset may run any code, another
    // verification included: the node:crypto back-end compares in two buffers it keeps, which
    // such a nested call must not overwrite between the write of the header and the comparison.
    function reentrant(inner: { payload: string | Uint8Array; signature: string }): DataView {
      const view = new DataView(bytes.buffer);
      Object.defineProperty(view, "byteOffset", {
        get() {
          void verifySignature({ secret: SECRET, ...inner });
          return 0;
        },
      });
      return view;
    }
    const right = mac(SECRET, bytes);
    const forged = "0".repeat(64);
    // The genuine signature passes.
    const genuine = reentrant({ payload: "inner", signature: mac(SECRET, "inner") });
    expect(await verifySignature({ secret: SECRET, payload: genuine, signature: right })).toBe(true);
    // A forged one does not, though the inner call computed the right MAC meanwhile.
    const forgery = reentrant({ payload: bytes, signature: right });
    expect(await verifySignature({ secret: SECRET, payload: forgery, signature: forged })).toBe(false);
  });

  it("keeps one caller's tampering with its returned promise from changing another caller's answer", async () => {
    const refused = verifySignature({ secret: SECRET, payload: "a", signature: "0".repeat(64) });
    // A caller (or an instrumentation library) decorating the promise it was given:
    // (On a frozen promise the assignment does nothing: that is one acceptable fix.)
    Reflect.set(refused, "then", (onFulfilled: (value: boolean) => unknown) => Promise.resolve(true).then(onFulfilled));
    const other = verifySignature({ secret: SECRET, payload: "b", signature: "1".repeat(64) });
    const answer = await new Promise<boolean>((done) => {
      other.then(done);
    });
    expect(answer).toBe(false);
  });
});

describe("choosing the HMAC implementation", () => {
  const realNodeCrypto = process.getBuiltinModule("node:crypto");
  afterEach(() => {
    vi.restoreAllMocks();
    vi.resetModules();
  });

  it.each([
    [
      "getBuiltinModule throws",
      () => {
        throw new Error("not here");
      },
    ],
    [
      "node:crypto lacks createSecretKey",
      (id: string) => (id === "node:crypto" ? { createHmac() {}, timingSafeEqual() {} } : { Buffer }),
    ],
    [
      "node:crypto lacks createHmac",
      (id: string) => (id === "node:crypto" ? { createSecretKey() {}, timingSafeEqual() {} } : { Buffer }),
    ],
    [
      "node:crypto lacks timingSafeEqual",
      (id: string) => (id === "node:crypto" ? { createHmac() {}, createSecretKey() {} } : { Buffer }),
    ],
    ["node:buffer lacks Buffer", (id: string) => (id === "node:crypto" ? realNodeCrypto : {})],
    ["getBuiltinModule returns nothing", () => undefined],
  ])("falls back to Web Crypto when %s", async (_, stub) => {
    vi.resetModules();
    const original = process.getBuiltinModule;
    (process as { getBuiltinModule?: unknown }).getBuiltinModule = stub;
    let core: typeof import("flag-webhooks");
    try {
      core = await import("flag-webhooks");
    } finally {
      process.getBuiltinModule = original;
    }
    const subtleVerify = vi.spyOn(crypto.subtle, "verify");
    expect(
      await core.verifySignature({ secret: compact.secret, payload: compact.body, signature: compact.signature }),
    ).toBe(true);
    expect(subtleVerify).toHaveBeenCalledOnce();
  });
});
