import { writeFileSync } from "node:fs";
import { request } from "node:http";
import { join } from "node:path";
import { createEmulator, type Emulator } from "flag-webhooks/emulator";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { cleanupAfterEach, tempDir as makeTempDir } from "../support/cleanup.js";
import { call } from "../support/emulator.js";

// What the emulated API says, word for word, over real HTTP: its refusals and the edges of what
// it accepts. api.test.ts checks each refusal's status and code and the field it names; this file
// checks the whole message a developer reads, the limits (1 MiB, 0 and 100 percent, the loopback
// spellings a webhook URL may use) and the headers of every answer.

let emulator: Emulator;
let clock = new Date("2026-03-01T00:00:00.000Z");
let project = "";
let projects = 0;

beforeAll(async () => {
  emulator = await createEmulator({ now: () => clock, retry: { attempts: 1 } });
});
afterAll(() => emulator.close());
beforeEach(() => {
  project = `m${++projects}`;
  clock = new Date("2026-03-01T00:00:00.000Z");
});

const path = (rest = "") => `/projects/${project}${rest}`;

async function expectRefusal(
  answer: Promise<{ status: number; json: any; headers: Headers }>,
  status: number,
  code: string,
  message: string,
) {
  const { status: got, json, headers } = await answer;
  expect([got, json]).toEqual([status, { error: { code, message } }]);
  expect(headers.get("content-type")).toBe("application/json; charset=utf-8");
  expect(headers.get("cache-control")).toBe("no-store");
}

/** A request with node:http, which sends any Host and body as given. */
function raw(options: {
  method?: string;
  path: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
}): Promise<{ status: number; json: any; headers: Record<string, unknown> }> {
  const { port } = new URL(emulator.url);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: "127.0.0.1",
        port,
        method: options.method ?? "POST",
        path: `/v2${options.path}`,
        headers: { authorization: `Bearer ${emulator.token}`, ...options.headers },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (chunk: Buffer) => chunks.push(chunk));
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          resolve({ status: res.statusCode ?? 0, json: text ? JSON.parse(text) : undefined, headers: res.headers });
        });
      },
    );
    req.on("error", (error: NodeJS.ErrnoException) => {
      if (error.code !== "ECONNRESET" && error.code !== "EPIPE") reject(error);
    });
    req.end(options.body);
  });
}

const create = (body: unknown) => call(emulator, "POST", path("/flags"), { body });
const update = (key: string, body: unknown) => call(emulator, "PATCH", path(`/flags/${key}`), { body });
const hook = (body: unknown) => call(emulator, "POST", path("/webhooks"), { body });
const EVENTS = "flag.created, flag.updated, flag.deleted, rollout.step, rollout.guard_triggered";

describe("request bodies", () => {
  it("needs Content-Type application/json, in any case and with parameters", async () => {
    const message = "requests with a body must have Content-Type: application/json";
    const body = JSON.stringify({ key: "ct", type: "boolean" });
    const refused: Record<string, string>[] = [
      {},
      { "content-type": "text/plain" },
      { "content-type": "application/jsonx" },
    ];
    for (const headers of refused) {
      const answer = await raw({ path: path("/flags"), headers, body });
      expect([answer.status, answer.json]).toEqual([415, { error: { code: "unsupported_media_type", message } }]);
    }
    const ok = await raw({
      path: path("/flags"),
      headers: { "content-type": " Application/JSON ; charset=utf-8" },
      body,
    });
    expect(ok.status).toBe(201);
  });

  it("takes a body of exactly 1 MiB and refuses one byte more", async () => {
    const exactly = (size: number) => {
      const head = '{"key":"';
      const tail = '","type":"boolean"}';
      return `${head}${"k".repeat(size - head.length - tail.length)}${tail}`;
    };
    const json = { "content-type": "application/json" };
    const fits = await raw({ path: path("/flags"), headers: json, body: exactly(1024 * 1024) });
    // Read and parsed: refused for its key, not for its size.
    expect([fits.status, fits.json.error.message]).toEqual([400, "key must be at most 100 characters"]);
    const over = await raw({ path: path("/flags"), headers: json, body: exactly(1024 * 1024 + 1) });
    expect([over.status, over.json]).toEqual([
      413,
      { error: { code: "payload_too_large", message: "the request body is larger than 1 MiB" } },
    ]);
  });

  it("refuses a body that is not JSON, or not a JSON object", async () => {
    const json = { "content-type": "application/json" };
    const notJson = await raw({ path: path("/flags"), headers: json, body: "{key:" });
    expect([notJson.status, notJson.json]).toEqual([
      400,
      { error: { code: "invalid_request", message: "the request body is not valid JSON" } },
    ]);
    for (const body of ["[1]", "null", '"flag"', "7"]) {
      const answer = await raw({ path: path("/flags"), headers: json, body });
      expect([answer.status, answer.json], body).toEqual([
        400,
        { error: { code: "invalid_request", message: "the request body must be a JSON object" } },
      ]);
    }
  });

  it("answers 204 with no-store to a delete", async () => {
    expect((await create({ key: "gone", type: "boolean" })).status).toBe(201);
    const answer = await raw({ method: "DELETE", path: path("/flags/gone") });
    expect(answer.status).toBe(204);
    expect(answer.headers["cache-control"]).toBe("no-store");
  });
});

describe("creating a flag", () => {
  it("says which fields a request takes", async () => {
    await expectRefusal(
      create({ key: "a", type: "boolean", enabled: true }),
      400,
      "invalid_request",
      "enabled is not a field of this request (allowed: key, type, variations, tags)",
    );
  });

  it("names the types, and says a string or number flag needs its variations", async () => {
    for (const type of [7, "bool", undefined]) {
      await expectRefusal(
        create({ key: "a", type }),
        400,
        "invalid_request",
        "type is required and must be one of boolean, string, number, json",
      );
    }
    await expectRefusal(
      create({ key: "a", type: "string" }),
      400,
      "invalid_request",
      "variations is required for a string flag",
    );
    await expectRefusal(
      create({ key: "a", type: "json" }),
      400,
      "invalid_request",
      "variations is required for a json flag",
    );
    await expectRefusal(
      create({ key: "a", type: "number", variations: [1, "2"] }),
      400,
      "invalid_request",
      "variations[1] must be a number",
    );
    await expectRefusal(
      create({ key: "a", type: "string", variations: ["x", 2] }),
      400,
      "invalid_request",
      "variations[1] must be a string",
    );
  });

  it("keeps tags as given, none by default, and refuses an empty or non-string tag", async () => {
    expect((await create({ key: "plain", type: "boolean" })).json.tags).toEqual([]);
    expect((await create({ key: "tagged", type: "boolean", tags: ["a", "b"] })).json.tags).toEqual(["a", "b"]);
    await expectRefusal(
      create({ key: "t", type: "boolean", tags: [7] }),
      400,
      "invalid_request",
      "tags[0] must be a non-empty string",
    );
    await expectRefusal(
      create({ key: "t", type: "boolean", tags: ["a", ""] }),
      400,
      "invalid_request",
      "tags[1] must be a non-empty string",
    );
  });
});

describe("updating a flag", () => {
  beforeEach(async () => {
    expect((await create({ key: "f", type: "boolean" })).status).toBe(201);
  });

  it("needs an environment, as a non-empty string", async () => {
    for (const environment of [undefined, "", 7]) {
      await expectRefusal(
        update("f", { environment, on: true }),
        400,
        "invalid_request",
        "environment is required and must be a string",
      );
    }
  });

  it("needs rollout to be an object with a percent from 0 to 100", async () => {
    for (const rollout of [5, null, [50], "50"]) {
      await expectRefusal(
        update("f", { environment: "staging", rollout }),
        400,
        "invalid_request",
        "rollout must be an object with the field percent",
      );
    }
    for (const percent of ["50", -1, 100.5, null]) {
      await expectRefusal(
        update("f", { environment: "staging", rollout: { percent } }),
        400,
        "invalid_request",
        "rollout.percent must be a number from 0 to 100",
      );
    }
    for (const percent of [0, 100, 37.5]) {
      const answer = await update("f", { environment: "staging", rollout: { percent } });
      expect([answer.status, answer.json.environments.staging.rollout]).toEqual([200, { percent }]);
    }
  });

  it("sends no event and keeps updatedAt for a percent it already has", async () => {
    const events = () => emulator.deliveries().filter((d) => d.project === project).length;
    expect((await hook({ url: "http://127.0.0.1:9/webhooks", events: ["flag.updated"] })).status).toBe(201);
    const first = await update("f", { environment: "staging", rollout: { percent: 40 } });
    expect(first.status).toBe(200);
    const sent = events();
    expect(sent).toBe(1);
    clock = new Date("2026-03-02T00:00:00.000Z");
    const again = await update("f", { environment: "staging", rollout: { percent: 40 } });
    expect(again.json.updatedAt).toBe(first.json.updatedAt);
    expect(events()).toBe(sent);
  });
});

describe("emulator rollout events", () => {
  it("steps a rollout that has no percent yet, from null", async () => {
    expect((await create({ key: "r", type: "boolean" })).status).toBe(201);
    expect((await hook({ url: "http://127.0.0.1:9/webhooks", events: ["rollout.step"] })).status).toBe(201);
    const answer = await call(emulator, "POST", `/_emulator${path("/flags/r/rollout-step")}`, {
      body: { environment: "production", percent: 10 },
    });
    expect([answer.status, answer.json.environments.production.rollout]).toEqual([200, { percent: 10 }]);
    const step = emulator.deliveries().find((d) => d.project === project && d.event.type === "rollout.step");
    expect(JSON.parse(step?.request.body ?? "{}").data).toEqual({ flag: "r", rollout: { from: null, to: 10 } });
  });
});

describe("emulator guard events", () => {
  it("pauses a rollout that has no percent yet: from null to null", async () => {
    expect((await create({ key: "g", type: "boolean" })).status).toBe(201);
    expect((await hook({ url: "http://127.0.0.1:9/webhooks", events: ["rollout.guard_triggered"] })).status).toBe(201);
    const answer = await call(emulator, "POST", `/_emulator${path("/flags/g/guard-triggered")}`, {
      body: { environment: "staging", action: "paused" },
    });
    expect(answer.status).toBe(200);
    expect(answer.json.environments.staging.rollout).toBeUndefined();
    const guard = emulator
      .deliveries()
      .find((d) => d.project === project && d.event.type === "rollout.guard_triggered");
    expect(JSON.parse(guard?.request.body ?? "{}").data).toEqual({
      flag: "g",
      action: "paused",
      rollout: { from: null, to: null },
    });
  });
});

describe("webhooks", () => {
  it("says what a webhook needs, word for word", async () => {
    const cases: [unknown, string][] = [
      [{ events: ["flag.updated"] }, "url is required and must be a string"],
      [{ url: 7, events: ["flag.updated"] }, "url is required and must be a string"],
      [{ url: "nope", events: ["flag.updated"] }, "url must be an absolute URL"],
      [
        { url: "http://example.com/webhooks", events: ["flag.updated"] },
        "url must be an https:// URL (http:// is accepted for localhost and 127.0.0.1 only)",
      ],
      [
        { url: "http://127.0.0.1.example.com/webhooks", events: ["flag.updated"] },
        "url must be an https:// URL (http:// is accepted for localhost and 127.0.0.1 only)",
      ],
      [
        { url: "ftp://127.0.0.1/webhooks", events: ["flag.updated"] },
        "url must be an https:// URL (http:// is accepted for localhost and 127.0.0.1 only)",
      ],
      [
        { url: "ws://localhost:3000/webhooks", events: ["flag.updated"] },
        "url must be an https:// URL (http:// is accepted for localhost and 127.0.0.1 only)",
      ],
      [{ url: "https://user@example.com/", events: ["flag.updated"] }, "url must not contain credentials"],
      [{ url: "https://:pw@example.com/", events: ["flag.updated"] }, "url must not contain credentials"],
      [{ url: "https://example.com/" }, `events is required: a non-empty array of ${EVENTS}`],
      [
        { url: "https://example.com/", events: ["flag.updated", "flag.archived"] },
        `events[1] must be one of ${EVENTS}`,
      ],
      [
        { url: "https://example.com/", events: ["flag.updated"], environments: [""] },
        "environments[0] must be a non-empty string",
      ],
    ];
    for (const [body, message] of cases) await expectRefusal(hook(body), 400, "invalid_request", message);
  });

  it("posts over plain HTTP to every spelling of loopback", async () => {
    for (const host of [
      "127.10.20.30",
      "localhost",
      "[::1]",
      "[::ffff:127.0.0.1]",
      "[::ffff:127.1.2.3]",
      "[::ffff:7fab:cdef]",
    ]) {
      const answer = await hook({ url: `http://${host}:3000/webhooks`, events: ["flag.updated"] });
      expect(answer.status, host).toBe(201);
    }
    for (const host of ["[::ffff:128.0.0.1]", "[::ffff:7f:1]", "128.0.0.1", "[::2]"]) {
      const answer = await hook({ url: `http://${host}:3000/webhooks`, events: ["flag.updated"] });
      expect(answer.status, host).toBe(400);
    }
  });

  it("says which webhook it does not know", async () => {
    await expectRefusal(
      call(emulator, "DELETE", path("/webhooks/wh_0123")),
      404,
      "not_found",
      'no webhook with the id "wh_0123" in this project',
    );
  });
});

describe("listing flags", () => {
  it("names the query parameters it takes, and refuses an empty tag", async () => {
    await expectRefusal(
      call(emulator, "GET", path("/flags?page=2")),
      400,
      "invalid_request",
      "page is not a query parameter of this request (allowed: tag, stale, limit, cursor)",
    );
    await expectRefusal(call(emulator, "GET", path("/flags?tag=")), 400, "invalid_request", "tag must not be empty");
  });

  it("takes only the cursors it gave, in their exact spelling", async () => {
    for (const key of ["c1", "c2", "c3"]) expect((await create({ key, type: "boolean" })).status).toBe(201);
    const page = await call(emulator, "GET", path("/flags?limit=1"));
    const cursor: string = page.json.next;
    expect(typeof cursor).toBe("string");
    expect((await call(emulator, "GET", path(`/flags?limit=1&cursor=${cursor}`))).status).toBe(200);
    // The same bytes, base64 with its padding: decodes alike, but is not a cursor it gave.
    const padded = `${cursor}${"=".repeat((4 - (cursor.length % 4)) % 4 || 4)}`;
    await expectRefusal(
      call(emulator, "GET", path(`/flags?limit=1&cursor=${encodeURIComponent(padded)}`)),
      400,
      "invalid_request",
      "cursor is not a cursor from a previous response",
    );
  });
});

describe("the Host guard", () => {
  it("refuses a Host that is no host at all", async () => {
    for (const host of ["[::1", "a b", "127.0.0.1:port"]) {
      const answer = await raw({ method: "GET", path: path("/flags"), headers: { host } });
      expect(answer.status, host).toBe(403);
      expect(answer.json.error.code).toBe("forbidden");
    }
  });
});

describe("routing, word for word", () => {
  it("says what it does not serve, where and with which method", async () => {
    await expectRefusal(call(emulator, "GET", "/nothing/here"), 404, "not_found", "no endpoint at /nothing/here");
    const root = await raw({ method: "GET", path: "" });
    expect([root.status, root.json]).toEqual([404, { error: { code: "not_found", message: "no endpoint at /" } }]);
    const outside = await fetch(`${new URL(emulator.url).origin}/v3/projects`, { method: "POST" });
    expect([outside.status, await outside.json()]).toEqual([
      404,
      { error: { code: "not_found", message: "nothing at POST /v3/projects" } },
    ]);
    // Paths that only start like the API's are not the API: no token is asked for.
    const near = await fetch(`${new URL(emulator.url).origin}/v2x`, { method: "POST" });
    expect([near.status, (await near.json()).error.message]).toEqual([404, "nothing at POST /v2x"]);
    await expectRefusal(
      call(emulator, "GET", "/_emulator/nowhere"),
      404,
      "not_found",
      "no emulator endpoint at GET /nowhere",
    );
    await expectRefusal(
      call(emulator, "PUT", path("/flags")),
      405,
      "method_not_allowed",
      "PUT is not allowed here (allowed: GET, POST)",
    );
    await expectRefusal(
      call(emulator, "PUT", "/_emulator/state"),
      405,
      "method_not_allowed",
      "PUT is not allowed here (allowed: GET)",
    );
  });

  it("names the path segment whose percent-encoding is broken", async () => {
    await expectRefusal(
      call(emulator, "GET", "/projects/%E0/flags"),
      400,
      "invalid_request",
      "project in the path is not valid percent-encoding",
    );
    await expectRefusal(
      call(emulator, "PATCH", path("/flags/%E0"), { body: { environment: "staging" } }),
      400,
      "invalid_request",
      "key in the path is not valid percent-encoding",
    );
    await expectRefusal(
      call(emulator, "DELETE", path("/webhooks/%E0")),
      400,
      "invalid_request",
      "id in the path is not valid percent-encoding",
    );
    await expectRefusal(
      call(emulator, "POST", `/_emulator${path("/flags/%E0/rollout-step")}`, {
        body: { environment: "staging", percent: 5 },
      }),
      400,
      "invalid_request",
      "key in the path is not valid percent-encoding",
    );
    await expectRefusal(
      call(emulator, "POST", "/_emulator/deliveries/%E0/redeliver"),
      400,
      "invalid_request",
      "id in the path is not valid percent-encoding",
    );
  });

  it("answers the token's absence and other origins word for word", async () => {
    const unauthorized = "the API token is missing or invalid (send Authorization: Bearer <token>)";
    await expectRefusal(call(emulator, "GET", path("/flags"), { token: null }), 401, "unauthorized", unauthorized);
    // The scheme takes more than one space before the token, and nothing before "Bearer".
    const spaced = await call(emulator, "GET", path("/flags"), {
      headers: { authorization: `Bearer   ${emulator.token}` },
    });
    expect(spaced.status).toBe(200);
    await expectRefusal(
      call(emulator, "GET", path("/flags"), { headers: { authorization: `xBearer ${emulator.token}` } }),
      401,
      "unauthorized",
      unauthorized,
    );
    await expectRefusal(
      call(emulator, "GET", path("/flags"), { headers: { "sec-fetch-site": "cross-site" } }),
      403,
      "forbidden",
      "the emulator answers no request made by another origin's page",
    );
    expect((await call(emulator, "GET", path("/flags"), { headers: { "sec-fetch-site": "none" } })).status).toBe(200);
    const host = await raw({ method: "GET", path: path("/flags"), headers: { host: "example.com" } });
    expect(host.json.error.message).toBe(
      "the emulator answers only requests addressed to localhost, 127.0.0.1, [::1] or the address it listens on, with its port",
    );
  });

  it("says what the emulator's own endpoints need", async () => {
    expect((await create({ key: "e", type: "boolean" })).status).toBe(201);
    const rollout = (body: unknown) => call(emulator, "POST", `/_emulator${path("/flags/e/rollout-step")}`, { body });
    await expectRefusal(
      rollout({ percent: 5 }),
      400,
      "invalid_request",
      "environment is required and must be a string",
    );
    await expectRefusal(
      rollout({ environment: "staging", percent: 101 }),
      400,
      "invalid_request",
      "percent must be a number from 0 to 100",
    );
    await expectRefusal(
      call(emulator, "POST", `/_emulator${path("/flags/e/guard-triggered")}`, {
        body: { environment: "staging", action: "stopped" },
      }),
      400,
      "invalid_request",
      "action must be paused or rolled_back",
    );
    await expectRefusal(
      call(emulator, "POST", "/_emulator/deliveries/dlv_none/redeliver"),
      404,
      "not_found",
      "no such delivery",
    );
  });
});

describe("the state file, refused word for word", () => {
  const cleanup = cleanupAfterEach();
  const tempDir = () => makeTempDir(cleanup, "flag-webhooks-state-");
  function stateFile(content: unknown): string {
    const dir = tempDir();
    const file = join(dir, "state.json");
    writeFileSync(file, typeof content === "string" ? content : JSON.stringify(content));
    return file;
  }
  const refused = (file: string, why: string) =>
    expect(createEmulator({ stateFile: file })).rejects.toThrow(
      new TypeError(`flag-webhooks/emulator: option "stateFile": cannot read the state file ${file}: ${why}`),
    );
  const valid = { version: 1, token: "state-token-1", seq: 0, projects: [], deliveries: [] };

  it("refuses an empty path, a folder, and what is not a state file of this version", async () => {
    await refused("", "it must be a file path");
    const folder = tempDir();
    await refused(folder, "it is a directory");
    const notState = "it is not a state file of this version of the emulator";
    for (const content of [
      { ...valid, version: 2 },
      { ...valid, projects: {} },
      { ...valid, deliveries: null },
      null,
      [],
    ]) {
      await refused(stateFile(content), notState);
    }
    for (const token of [7, "short", "with space s"])
      await refused(stateFile({ ...valid, token }), "its token is not valid");
    const emulatorFromState = await createEmulator({ stateFile: stateFile(valid) });
    expect(emulatorFromState.token).toBe("state-token-1");
    await emulatorFromState.close();
  });
});

describe("the page's feeds", () => {
  it("lists each project's flags newest first in the state", async () => {
    for (const key of ["older", "newer"]) expect((await create({ key, type: "boolean" })).status).toBe(201);
    const state = await call(emulator, "GET", "/_emulator/state");
    const mine = state.json.projects.find((p: { id: string }) => p.id === project);
    expect(mine.flags.map((f: { key: string }) => f.key)).toEqual(["newer", "older"]);
    expect(state.headers.get("cache-control")).toBe("no-store");
  });

  it("streams changes as server-sent events to a holder of the token", async () => {
    const origin = new URL(emulator.url).origin;
    await expectRefusal(
      call(emulator, "POST", "/_emulator/events"),
      405,
      "method_not_allowed",
      "POST is not allowed here (allowed: GET)",
    );
    const denied = await fetch(`${origin}/_emulator/events?token=wrong-token-x`);
    expect(denied.status).toBe(401);
    const controller = new AbortController();
    const stream = await fetch(`${origin}/_emulator/events?token=${encodeURIComponent(emulator.token)}`, {
      signal: controller.signal,
    });
    try {
      expect(stream.status).toBe(200);
      expect(stream.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
      expect(stream.headers.get("cache-control")).toBe("no-store");
      const reader = (stream.body as ReadableStream<Uint8Array>).getReader();
      let text = "";
      const readUntil = async (needle: string) => {
        while (!text.includes(needle)) {
          const { value, done } = await reader.read();
          if (done) break;
          text += new TextDecoder().decode(value);
        }
      };
      await readUntil("retry: 1000\n\n");
      expect(text.startsWith("retry: 1000\n\n")).toBe(true);
      expect((await create({ key: "streamed", type: "boolean" })).status).toBe(201);
      await readUntil('"streamed"');
      const event = text.split("\n\n").find((part) => part.includes('"streamed"')) ?? "";
      expect(event).toMatch(/^event: projects\ndata: \[/);
    } finally {
      controller.abort();
    }
  });

  it("refuses to redeliver for a webhook that was deleted", async () => {
    const made = await hook({ url: "http://127.0.0.1:9/webhooks", events: ["flag.created"] });
    expect((await create({ key: "lost", type: "boolean" })).status).toBe(201);
    const delivery = emulator.deliveries().find((d) => d.project === project);
    expect(delivery).toBeDefined();
    expect((await call(emulator, "DELETE", path(`/webhooks/${made.json.id}`))).status).toBe(204);
    await expectRefusal(
      call(emulator, "POST", `/_emulator/deliveries/${delivery?.id}/redeliver`),
      409,
      "webhook_deleted",
      "the delivery's webhook was deleted",
    );
  });
});

describe("listening on every interface", () => {
  it("gives loopback URLs for an unspecified bind address, and answers there", async () => {
    for (const [host, shown] of [
      ["0.0.0.0", "127.0.0.1"],
      ["::", "[::1]"],
    ] as const) {
      const open = await createEmulator({ host, token: "bind-token-1" });
      try {
        expect(open.url).toMatch(new RegExp(`^http://${shown.replace(/[[\].]/g, "\\$&")}:\\d+/v2$`));
        const answer = await fetch(`${open.url}/projects/p/flags`, {
          headers: { authorization: "Bearer bind-token-1" },
        });
        expect(answer.status).toBe(200);
      } finally {
        await open.close();
      }
    }
  });
});

describe("options and the page's routes", () => {
  it("checks every environment key and takes maxDeliveries from 1", async () => {
    await expect(createEmulator({ environments: ["production", "not a key!"] })).rejects.toThrow(
      'flag-webhooks/emulator: option "environments" must be a non-empty list of keys',
    );
    const one = await createEmulator({ maxDeliveries: 1 });
    await one.close();
  });

  it("counts a flag unchanged for 30 days as stale by default", async () => {
    expect((await create({ key: "old-flag", type: "boolean" })).status).toBe(201);
    clock = new Date("2026-04-15T00:00:00.000Z");
    const stale = await call(emulator, "GET", path("/flags?stale=true"));
    expect(stale.json.data.map((f: { key: string }) => f.key)).toEqual(["old-flag"]);
  });

  it("serves the page to GET and HEAD only, and checks the origin of the API and its own endpoints", async () => {
    const origin = new URL(emulator.url).origin;
    expect((await fetch(`${origin}/`, { method: "HEAD" })).status).toBe(200);
    const posted = await fetch(`${origin}/`, { method: "POST" });
    expect([posted.status, (await posted.json()).error.message]).toEqual([404, "nothing at POST /"]);
    for (const where of ["/_emulator/state", "", "/projects/p/flags"]) {
      await expectRefusal(
        call(emulator, "GET", where.startsWith("/_emulator") ? where : `${where}`, {
          headers: { "sec-fetch-site": "cross-site" },
        }),
        403,
        "forbidden",
        "the emulator answers no request made by another origin's page",
      );
    }
  });
});
