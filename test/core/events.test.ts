import {
  MemoryDedupeStore,
  parseEvent,
  SIGNATURE_HEADER,
  sign,
  toErrorBody,
  verifyEvent,
  WebhookError,
} from "flag-webhooks";
import { webhookHandler } from "flag-webhooks/fetch";
import { describe, expect, it } from "vitest";
import { vector } from "../support/vectors.js";

const compact = vector("flag-updated-compact");
const base = JSON.parse(compact.body.toString("utf8"));

/** A copy of the sample flag.updated event with `edit` applied to it. */
function event(edit: (e: Record<string, any>) => void = () => {}): string {
  const copy = structuredClone(base);
  edit(copy);
  return JSON.stringify(copy);
}

function invalidPayload(payload: string | Uint8Array): WebhookError {
  try {
    parseEvent(payload);
  } catch (error) {
    expect(error).toBeInstanceOf(WebhookError);
    expect((error as WebhookError).code).toBe("invalid_payload");
    expect((error as WebhookError).status).toBe(400);
    return error as WebhookError;
  }
  throw new Error("parseEvent accepted an invalid payload");
}

describe("parseEvent", () => {
  it("parses the sample flag.updated delivery into a typed event", () => {
    const parsed = parseEvent(compact.body);
    expect(parsed).toEqual(base);
    if (parsed.type !== "flag.updated") throw new Error("wrong type");
    expect(parsed.data.changes[0]).toEqual({ path: "on", from: false, to: true });
    expect(parsed.data.actor.email).toBe("dana@example.com");
  });

  it("parses pretty-printed JSON and strings as well as bytes", () => {
    expect(parseEvent(vector("flag-updated-pretty").body)).toEqual(base);
    expect(parseEvent(compact.body.toString())).toEqual(base);
  });

  it("keeps fields it does not know, at every level", () => {
    const parsed = parseEvent(
      event((e) => {
        e.extra = 1;
        e.data.reason = "audit";
        e.data.changes[0].meta = { a: true };
      }),
    ) as unknown as Record<string, any>;
    expect(parsed.extra).toBe(1);
    expect(parsed.data.reason).toBe("audit");
    expect(parsed.data.changes[0].meta).toEqual({ a: true });
  });

  it.each(["flag.created", "flag.deleted", "rollout.step", "rollout.guard_triggered"])(
    "accepts %s with whatever object data the service sends",
    (type) => {
      const parsed = parseEvent(
        event((e) => {
          e.type = type;
          e.data = { flag: "x", anything: [1, 2] };
        }),
      );
      expect(parsed.type).toBe(type);
      expect(parsed.data).toEqual({ flag: "x", anything: [1, 2] });
    },
  );

  it("delivers an event of a type it does not know as type 'unknown', keeping the original type", () => {
    const parsed = parseEvent(
      event((e) => {
        e.type = "flag.archived";
        e.data = "anything at all";
      }),
    );
    expect(parsed.type).toBe("unknown");
    if (parsed.type !== "unknown") throw new Error("narrowing");
    expect(parsed.originalType).toBe("flag.archived");
    expect(parsed.data).toBe("anything at all");
    expect(parsed.id).toBe(base.id);
  });

  it.each([
    ["the body is not JSON", "not json", "body is not valid JSON"],
    ["the body is empty", "", "body is not valid JSON"],
    ["the body is a JSON array", "[]", "body must be an object"],
    ["the body is JSON null", "null", "body must be an object"],
    ["id is missing", event((e) => delete e.id), "id must be a string"],
    ["id is a number", event((e) => (e.id = 1)), "id must be a string"],
    ["type is missing", event((e) => delete e.type), "type must be a string"],
    ["environment is null", event((e) => (e.environment = null)), "environment must be a string"],
    ["createdAt is missing", event((e) => delete e.createdAt), "createdAt must be a string"],
    ["createdAt is not a timestamp", event((e) => (e.createdAt = "yesterday")), "createdAt must be an ISO 8601 UTC"],
    ["createdAt has no zone", event((e) => (e.createdAt = "2026-11-21T09:30:00")), "createdAt must be an ISO 8601 UTC"],
    ["data is missing", event((e) => delete e.data), "data is missing"],
    ["data is an array", event((e) => (e.data = [])), "data must be an object"],
    ["data.flag is missing", event((e) => delete e.data.flag), "data.flag must be a string"],
    ["data.changes is an object", event((e) => (e.data.changes = {})), "data.changes must be an array"],
    ["a change is not an object", event((e) => e.data.changes.push(null)), "data.changes[1] must be an object"],
    [
      "the third change has no path",
      event((e) => e.data.changes.push({ path: "a", from: 1, to: 2 }, { from: 1, to: 2 })),
      "data.changes[2].path must be a string",
    ],
    ["data.actor is missing", event((e) => delete e.data.actor), "data.actor must be an object"],
    ["data.actor.type is missing", event((e) => delete e.data.actor.type), "data.actor.type must be a string"],
    ["data.actor.email is a number", event((e) => (e.data.actor.email = 5)), "data.actor.email must be a string"],
    [
      "flag.created data is a string",
      event((e) => {
        e.type = "flag.created";
        e.data = "x";
      }),
      "data must be an object",
    ],
  ])("refuses a body where %s, naming the field", (_, payload, message) => {
    expect(invalidPayload(payload).message).toContain(message);
  });

  it.each([
    "2026-11-21T09:30:00Z",
    "2026-11-21T09:30:00.123Z",
    "2026-11-21T09:30:00.123456789Z",
    "2026-11-21T09:30:00+00:00",
    "2024-02-29T23:59:59.999Z",
    "2000-02-29T00:00:00Z",
    "2026-12-31T23:59:59Z",
    "0001-01-01T00:00:00Z",
    "9999-12-31T23:59:59.999Z",
  ])("accepts createdAt %s, an ISO 8601 UTC instant, unchanged", (createdAt) => {
    expect(parseEvent(event((e) => (e.createdAt = createdAt))).createdAt).toBe(createdAt);
  });

  it.each([
    ["month 13", "2026-13-01T09:30:00Z"],
    ["month 00", "2026-00-10T09:30:00Z"],
    ["day 40", "2026-11-40T09:30:00Z"],
    ["day 00", "2026-11-00T09:30:00Z"],
    ["30 February (Date.parse reads it as 2 March)", "2026-02-30T09:30:00Z"],
    ["29 February of a common year", "2026-02-29T09:30:00Z"],
    ["29 February 2100 (not a leap year)", "2100-02-29T09:30:00Z"],
    ["31 April", "2026-04-31T09:30:00Z"],
    ["hour 24", "2026-11-21T24:00:00Z"],
    ["minute 60", "2026-11-21T09:60:00Z"],
    ["second 60 (a leap second)", "2026-12-31T23:59:60Z"],
    ["the offset +99:99", "2026-11-21T09:30:00+99:99"],
    ["an offset that is not UTC", "2026-11-21T09:30:00+02:00"],
    ["a negative offset", "2026-11-21T09:30:00.5-05:30"],
    ["-00:00 (RFC 3339's unknown offset)", "2026-11-21T09:30:00-00:00"],
    ["a lowercase z", "2026-11-21T09:30:00z"],
    ["no seconds", "2026-11-21T09:30Z"],
    ["a comma fraction", "2026-11-21T09:30:00,5Z"],
    ["the basic format", "20261121T093000Z"],
    ["a leading x", "x2026-11-21T09:30:00Z"],
    ["a trailing x", "2026-11-21T09:30:00Zx"],
    ["an empty fraction", "2026-11-21T09:30:00.Z"],
    ["a letter in the fraction", "2026-11-21T09:30:00.aZ"],
    ["a space for T", "2026-11-21 09:30:00Z"],
    ["a trailing newline", "2026-11-21T09:30:00Z\n"],
  ])("refuses createdAt with %s: %s", (_, createdAt) => {
    expect(invalidPayload(event((e) => (e.createdAt = createdAt))).message).toBe(
      "createdAt must be an ISO 8601 UTC timestamp, such as 2026-11-21T09:30:00Z",
    );
  });

  it.each([
    ["id", (e: Record<string, any>, v: string) => (e.id = v), "id"],
    ["type", (e: Record<string, any>, v: string) => (e.type = v), "type"],
    ["environment", (e: Record<string, any>, v: string) => (e.environment = v), "environment"],
    ["data.flag", (e: Record<string, any>, v: string) => (e.data.flag = v), "data.flag"],
  ])("refuses a %s field that is not well-formed Unicode (a lone surrogate)", (_, set, field) => {
    for (const bad of ["evt_\ud800", "evt_\udbff", "\udc00evt", "evt_\ude00\ud83d"]) {
      expect(invalidPayload(event((e) => set(e, bad))).message).toBe(
        `${field} must be well-formed Unicode (it holds a lone surrogate)`,
      );
    }
    // A surrogate pair is a real character (U+1F600), escaped in JSON or not.
    expect(() => parseEvent(event((e) => set(e, "evt_\ud83d\ude00")))).not.toThrow();
    expect(() => parseEvent(event((e) => set(e, "evt_😀")).replace("😀", "\\ud83d\\ude00"))).not.toThrow();
  });

  it("refuses an id with a lone surrogate written as a JSON escape, as bytes and as a string", () => {
    // UTF-8 cannot carry a lone surrogate, but JSON's \uXXXX escape can.
    const escaped = event((e) => (e.id = "evt_X")).replace("evt_X", "evt_\\ud800");
    expect(escaped).toContain('"evt_\\ud800"');
    expect(invalidPayload(escaped).message).toContain("id must be well-formed Unicode");
    expect(invalidPayload(Buffer.from(escaped)).message).toContain("id must be well-formed Unicode");
  });

  it("ignores one leading byte order mark, in bytes and in a string alike", () => {
    const text = compact.body.toString("utf8");
    const bytes = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), compact.body]);
    expect(bytes.toString("utf8").charCodeAt(0)).toBe(0xfeff);
    expect(parseEvent(bytes)).toEqual(base);
    expect(parseEvent(bytes.toString("utf8"))).toEqual(base);
    expect(parseEvent(`\uFEFF${text}`)).toEqual(base);
    // Only one, the way TextDecoder drops only one: a second mark is not JSON in either form.
    const twice = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf, 0xef, 0xbb, 0xbf]), compact.body]);
    expect(invalidPayload(twice).message).toBe("body is not valid JSON");
    expect(invalidPayload(twice.toString("utf8")).message).toBe("body is not valid JSON");
    // A mark anywhere else is not a byte order mark.
    expect(invalidPayload(` \uFEFF${text}`).message).toBe("body is not valid JSON");
  });

  it("says exactly which field is wrong, and keeps the parser's error as the cause", () => {
    expect(invalidPayload(event((e) => delete e.id)).message).toBe("id must be a string");
    expect(invalidPayload(event((e) => (e.data.actor.email = 1))).message).toBe("data.actor.email must be a string");
    const notJson = invalidPayload("{");
    expect(notJson.message).toBe("body is not valid JSON");
    expect(notJson.cause).toBeInstanceOf(SyntaxError);
    expect(invalidPayload(vector("invalid-utf8-bytes").body).cause).toBeInstanceOf(TypeError);
  });

  it("accepts a body that really contains U+FFFD, as bytes", () => {
    const withReplacement = Buffer.from(
      event((e) => (e.data.flag = "bad-\uFFFD-name")),
      "utf8",
    );
    const parsed = parseEvent(withReplacement);
    expect(parsed.type === "flag.updated" && parsed.data.flag).toBe("bad-\uFFFD-name");
  });

  it("refuses bytes that are not UTF-8", () => {
    expect(invalidPayload(vector("invalid-utf8-bytes").body).message).toContain("not valid UTF-8");
  });

  it("does not let __proto__ in a body change any prototype", () => {
    const parsed = parseEvent(event((e) => (e.data.__proto__x = 1)).replace("__proto__x", "__proto__")) as unknown as {
      data: Record<string, unknown>;
    };
    expect(Object.getPrototypeOf(parsed.data)).toBe(Object.prototype);
    expect(({} as Record<string, unknown>).flag).toBeUndefined();
  });
});

describe("verifyEvent", () => {
  const { secret, body, signature } = compact;

  async function refusal(options: Parameters<typeof verifyEvent>[0]): Promise<WebhookError> {
    const error = await verifyEvent(options).then(
      () => {
        throw new Error("verifyEvent accepted the delivery");
      },
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(WebhookError);
    return error as WebhookError;
  }

  it("returns the typed event of an authentic delivery, under a rotation list too", async () => {
    expect(await verifyEvent({ secret, payload: body, signature })).toEqual(base);
    expect(await verifyEvent({ secret: ["new-secret", secret], payload: body, signature })).toEqual(base);
  });

  it.each([undefined, null, "", []])("answers missing_signature (401) for a header that is %j", async (missing) => {
    const error = await refusal({ secret, payload: body, signature: missing });
    expect([error.code, error.status]).toEqual(["missing_signature", 401]);
    expect(error.message).toContain(SIGNATURE_HEADER);
  });

  it("answers invalid_signature (401) for a wrong or repeated header", async () => {
    for (const bad of ["0".repeat(64), `sha256=${signature}`, [signature, signature]]) {
      const error = await refusal({ secret, payload: body, signature: bad });
      expect([error.code, error.status]).toEqual(["invalid_signature", 401]);
    }
  });

  it("never parses an unauthenticated body: a forged non-JSON body is invalid_signature", async () => {
    const error = await refusal({ secret, payload: "}{ not json", signature });
    expect(error.code).toBe("invalid_signature");
  });

  it("answers invalid_payload (400) for an authentic body that is not an event", async () => {
    const payload = '{"hello":"world"}';
    const error = await refusal({ secret, payload, signature: await sign({ secret, payload }) });
    expect([error.code, error.status]).toEqual(["invalid_payload", 400]);
  });

  it("refuses an authentic event whose id, type or environment holds a lone surrogate (400)", async () => {
    for (const edit of [
      (e: Record<string, any>) => (e.id = "evt_\ud800"),
      (e: Record<string, any>) => (e.type = "flag.\udbff"),
      (e: Record<string, any>) => (e.environment = "prod\udc00"),
    ]) {
      const payload = event(edit);
      const error = await refusal({ secret, payload, signature: await sign({ secret, payload }) });
      expect([error.code, error.status]).toEqual(["invalid_payload", 400]);
      expect(error.message).toContain("must be well-formed Unicode");
    }
  });

  it("gives a body with a byte order mark one answer, as bytes or as a string: the event", async () => {
    const payload = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), body]);
    const signed = await sign({ secret, payload });
    expect(await verifyEvent({ secret, payload, signature: signed })).toEqual(base);
    // Buffer#toString keeps the mark, so the string's UTF-8 bytes are the signed bytes.
    expect(await verifyEvent({ secret, payload: payload.toString("utf8"), signature: signed })).toEqual(base);
    // The signature covers the mark: the body without it is another body, which is what fetch's
    // request.text() hands over (docs/core.md says to pass request.arrayBuffer() instead).
    expect((await refusal({ secret, payload: body, signature: signed })).code).toBe("invalid_signature");
    const request = () => new Request("https://example.test/", { method: "POST", body: new Uint8Array(payload) });
    const text = await request().text();
    expect(text.charCodeAt(0)).not.toBe(0xfeff);
    expect((await refusal({ secret, payload: text, signature: signed })).code).toBe("invalid_signature");
    const bytes = await request().arrayBuffer();
    expect(await verifyEvent({ secret, payload: bytes, signature: signed })).toEqual(base);
  });

  it("refuses 30 February with maxAge instead of reading it as 2 March", async () => {
    const payload = event((e) => (e.createdAt = "2026-02-30T10:00:00Z"));
    const error = await refusal({
      secret,
      payload,
      signature: await sign({ secret, payload }),
      maxAge: "1h",
      now: () => Date.parse("2026-03-02T10:00:00Z"),
    });
    expect([error.code, error.status]).toEqual(["invalid_payload", 400]);
    expect(error.message).toContain("createdAt must be an ISO 8601 UTC timestamp");
  });

  it("never puts the secret or the expected digest in an error", async () => {
    const error = await refusal({ secret, payload: body, signature: "f".repeat(64) });
    const rendered = JSON.stringify(toErrorBody(error)) + error.message + String(error.stack);
    expect(rendered).not.toContain(secret);
    expect(rendered).not.toContain(signature);
  });

  it("renders an error in the service's error shape", async () => {
    const error = await refusal({ secret, payload: body, signature: undefined });
    expect(toErrorBody(error)).toEqual({ error: { code: "missing_signature", message: error.message } });
  });
});

describe("through an adapter (fetch, with dedupe)", () => {
  const { secret, body } = compact;

  async function deliver(handler: (request: Request) => Promise<Response>, payload: Uint8Array) {
    const headers = { [SIGNATURE_HEADER]: await sign({ secret, payload }) };
    const request = new Request("https://example.test/webhooks", {
      method: "POST",
      headers,
      body: new Uint8Array(payload),
    });
    const response = await handler(request);
    return [response.status, response.status === 204 ? null : (await response.json()).error.code];
  }

  it("answers 400 to ids that would collide as keys, and runs nothing", async () => {
    const seen: string[] = [];
    const handler = webhookHandler({
      secret,
      dedupe: { store: new MemoryDedupeStore(), ttl: "10m" },
      onEvent: (event) => void seen.push(event.id),
    });
    for (const id of ["evt_\ud800", "evt_\udbff"]) {
      const payload = Buffer.from(event((e) => (e.id = id)));
      expect(await deliver(handler, payload)).toEqual([400, "invalid_payload"]);
    }
    // An id outside the Basic Multilingual Plane is well-formed, and runs once.
    const astral = Buffer.from(event((e) => (e.id = "evt_😀")));
    expect(await deliver(handler, astral)).toEqual([204, null]);
    expect(seen).toEqual(["evt_😀"]);
  });

  it("runs a body that starts with a byte order mark", async () => {
    const seen: string[] = [];
    const handler = webhookHandler({ secret, onEvent: (event) => void seen.push(event.id) });
    expect(await deliver(handler, Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), body]))).toEqual([204, null]);
    expect(seen).toEqual([base.id]);
  });
});

describe("WebhookError", () => {
  it.each([
    ["missing_signature", 401],
    ["invalid_signature", 401],
    ["invalid_payload", 400],
    ["payload_too_large", 413],
    ["method_not_allowed", 405],
    ["body_already_parsed", 500],
    ["handler_error", 500],
  ] as const)("maps %s to status %i", (code, status) => {
    const error = new WebhookError(code, "m");
    expect([error.status, error.code, error.name, error.message]).toEqual([status, code, "WebhookError", "m"]);
    expect(error).toBeInstanceOf(Error);
  });

  it("is not claimed by instanceof for plain errors or look-alikes", () => {
    expect(new Error("x")).not.toBeInstanceOf(WebhookError);
    expect({ code: "invalid_payload", status: 400 }).not.toBeInstanceOf(WebhookError);
    expect(null).not.toBeInstanceOf(WebhookError);
  });
});
