import { describe, expect, it } from "vitest";
import { parseEvent, SIGNATURE_HEADER, sign, toErrorBody, verifyEvent, WebhookError } from "../src/index.js";
import { vector } from "./vectors.js";

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
    ["createdAt is not a timestamp", event((e) => (e.createdAt = "yesterday")), "createdAt must be an ISO 8601"],
    ["createdAt has no zone", event((e) => (e.createdAt = "2026-11-21T09:30:00")), "createdAt must be an ISO 8601"],
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

  it.each(["2026-11-21T09:30:00.123Z", "2026-11-21T09:30:00+02:00", "2026-11-21T09:30:00.5-05:30"])(
    "accepts createdAt %s, an ISO 8601 timestamp with a zone",
    (createdAt) => {
      expect(parseEvent(event((e) => (e.createdAt = createdAt))).createdAt).toBe(createdAt);
    },
  );

  it.each([
    "x2026-11-21T09:30:00Z",
    "2026-11-21T09:30:00Zx",
    "2026-11-21T09:30:00.Z",
    "2026-11-21T09:30:00.aZ",
    "2026-11-21T09:30:00*02:00",
    "2026-11-21T09:30:00+a2:00",
    "2026-11-21T09:30:00+0a:00",
    "2026-11-21T09:30:00+02:a0",
    "2026-11-21T09:30:00+02:0a",
    "2026-11-21 09:30:00Z",
  ])("refuses createdAt %s", (createdAt) => {
    expect(invalidPayload(event((e) => (e.createdAt = createdAt))).message).toBe(
      "createdAt must be an ISO 8601 timestamp",
    );
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
