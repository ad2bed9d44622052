import { createEmulator, type Emulator } from "flag-webhooks/emulator";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { call } from "../support/emulator.js";

// The emulated API against the interface document, section by section, over real HTTP.
// Where the document says "not shown", the expected answers are the emulator's documented
// choices (docs/emulator.md, "Local development").

let emulator: Emulator;
let clock = new Date("2026-01-01T00:00:00.000Z");
let project = "";
let projects = 0;

beforeAll(async () => {
  emulator = await createEmulator({
    now: () => clock,
    protectedEnvironments: ["production"],
    retry: { attempts: 1 },
  });
});
afterAll(() => emulator.close());
beforeEach(() => {
  // A fresh project per test: projects are created on first use of their id.
  project = `p${++projects}`;
  clock = new Date("2026-01-01T00:00:00.000Z");
});

const flags = (query = "") => call(emulator, "GET", `/projects/${project}/flags${query}`);
const create = (body: unknown) => call(emulator, "POST", `/projects/${project}/flags`, { body });
const update = (key: string, body: unknown) => call(emulator, "PATCH", `/projects/${project}/flags/${key}`, { body });
const remove = (key: string) => call(emulator, "DELETE", `/projects/${project}/flags/${key}`);
const hook = (body: unknown) => call(emulator, "POST", `/projects/${project}/webhooks`, { body });

function expectError(answer: { status: number; json: any }, status: number, code: string, field?: string) {
  expect(answer.status).toBe(status);
  expect(Object.keys(answer.json)).toEqual(["error"]);
  expect(Object.keys(answer.json.error).sort()).toEqual(["code", "message"]);
  expect(answer.json.error.code).toBe(code);
  expect(typeof answer.json.error.message).toBe("string");
  if (field) expect(answer.json.error.message).toContain(field);
}

describe("createEmulator", () => {
  it("listens on loopback and gives a base URL ending in /v2, a token and the page's URL", () => {
    expect(emulator.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v2$/);
    expect(emulator.pageUrl).toBe(`${emulator.url.replace(/v2$/, "")}#token=${emulator.token}`);
    expect(emulator.token.length).toBeGreaterThanOrEqual(20);
  });

  it("refuses options it cannot use, naming them", async () => {
    await expect(createEmulator({ environments: [] })).rejects.toThrow(/option "environments"/);
    await expect(createEmulator({ token: "short" })).rejects.toThrow(/option "token"/);
  });

  it("has the documented default retry policy", async () => {
    const other = await createEmulator();
    try {
      const { json } = await call(other, "GET", "/_emulator/state");
      expect(json.retry).toEqual({ attempts: 5, initialDelayMs: 1000, maxDelayMs: 60_000, timeoutMs: 10_000 });
      expect(json.environments).toEqual(["production", "staging", "development"]);
    } finally {
      await other.close();
    }
  });

  it("uses the environments it is given", async () => {
    const other = await createEmulator({ environments: ["prod", "dev"], token: "a-fixed-token" });
    try {
      expect(other.token).toBe("a-fixed-token");
      const answer = await call(other, "POST", "/projects/x/flags", { body: { key: "a", type: "boolean" } });
      expect(answer.json.environments).toEqual({ prod: { on: false }, dev: { on: false } });
    } finally {
      await other.close();
    }
  });
});

describe("section 5: authentication", () => {
  const endpoints: [string, string, unknown?][] = [
    ["GET", "/projects/a/flags"],
    ["POST", "/projects/a/flags", { key: "x", type: "boolean" }],
    ["PATCH", "/projects/a/flags/x", { environment: "staging", on: true }],
    ["DELETE", "/projects/a/flags/x"],
    ["POST", "/projects/a/webhooks", { url: "https://example.com/h", events: ["flag.updated"] }],
    ["DELETE", "/projects/a/webhooks/wh_1"],
    ["GET", "/no/such/endpoint"],
  ];

  it.each(endpoints)("%s %s without a token is unauthorized (401)", async (method, path, body) => {
    const answer = await call(emulator, method, path, { body, token: null });
    expectError(answer, 401, "unauthorized");
    expect(answer.headers.get("www-authenticate")).toMatch(/^Bearer /);
  });

  it.each([
    ["a wrong token", "Bearer not-the-token"],
    ["the token with another scheme", "Basic TOKEN"],
    ["the token with no scheme", "TOKEN"],
    ["the token with extra text", "Bearer TOKEN extra"],
    ["an empty bearer", "Bearer "],
  ])("refuses %s", async (_, header) => {
    const answer = await call(emulator, "GET", "/projects/a/flags", {
      headers: { authorization: header.replace("TOKEN", emulator.token) },
    });
    expectError(answer, 401, "unauthorized");
  });

  it("accepts the bearer scheme in any case", async () => {
    const answer = await call(emulator, "GET", "/projects/a/flags", {
      headers: { authorization: `bearer ${emulator.token}` },
    });
    expect(answer.status).toBe(200);
  });

  it("refuses a change made with a bad token and leaves the state as it was", async () => {
    const answer = await call(emulator, "POST", `/projects/${project}/flags`, {
      body: { key: "sneaky", type: "boolean" },
      token: "wrong-token",
    });
    expectError(answer, 401, "unauthorized");
    expect((await flags()).json.data).toEqual([]);
  });
});

describe("section 4: create a flag", () => {
  it("creates it switched off in every environment (the statement, not the sample) and answers 201 with the flag", async () => {
    const answer = await create({ key: "new-checkout", type: "boolean", tags: ["checkout"] });
    expect(answer.status).toBe(201);
    expect(answer.json).toEqual({
      key: "new-checkout",
      name: "new-checkout",
      type: "boolean",
      variations: [true, false],
      permanent: false,
      tags: ["checkout"],
      environments: { production: { on: false }, staging: { on: false }, development: { on: false } },
      createdAt: "2026-01-01T00:00:00.000Z",
    });
  });

  it.each([
    ["string", ["red", "blue"]],
    ["number", [1, 2.5, -3]],
    ["json", [{ a: 1 }, [1], "x", null]],
  ])("creates a %s flag with its variations in order", async (type, variations) => {
    const answer = await create({ key: `a-${type}`, type, variations });
    expect([answer.status, answer.json.type, answer.json.variations]).toEqual([201, type, variations]);
  });

  it("answers flag_exists (409) for a key in use, and keeps the first flag", async () => {
    await create({ key: "dup", type: "boolean", tags: ["first"] });
    const answer = await create({ key: "dup", type: "string", variations: ["a", "b"] });
    expectError(answer, 409, "flag_exists", "dup");
    const { data } = (await flags()).json;
    expect(data.map((f: any) => [f.key, f.type, f.tags])).toEqual([["dup", "boolean", ["first"]]]);
  });

  it("keeps keys per project", async () => {
    await create({ key: "shared", type: "boolean" });
    const other = await call(emulator, "POST", `/projects/${project}-other/flags`, {
      body: { key: "shared", type: "boolean" },
    });
    expect(other.status).toBe(201);
  });

  it.each([
    [{ type: "boolean" }, "key"],
    [{ key: 7, type: "boolean" }, "key"],
    [{ key: "", type: "boolean" }, "key"],
    [{ key: "New-Checkout", type: "boolean" }, "key"],
    [{ key: "new_checkout", type: "boolean" }, "key"],
    [{ key: "new checkout", type: "boolean" }, "key"],
    [{ key: "café", type: "boolean" }, "key"],
    [{ key: "a".repeat(101), type: "boolean" }, "key"],
    [{ key: "k" }, "type"],
    [{ key: "k", type: "bool" }, "type"],
    [{ key: "k", type: "string" }, "variations"],
    [{ key: "k", type: "number" }, "variations"],
    [{ key: "k", type: "json" }, "variations"],
    [{ key: "k", type: "string", variations: "a,b" }, "variations"],
    [{ key: "k", type: "string", variations: ["only"] }, "variations"],
    [{ key: "k", type: "string", variations: ["a", 1] }, "variations[1]"],
    [{ key: "k", type: "number", variations: [1, "2"] }, "variations[1]"],
    [{ key: "k", type: "string", variations: ["a", "a"] }, "variations"],
    [{ key: "k", type: "boolean", variations: [false, true] }, "variations"],
    [{ key: "k", type: "boolean", tags: "x" }, "tags"],
    [{ key: "k", type: "boolean", tags: ["ok", ""] }, "tags[1]"],
    [{ key: "k", type: "boolean", name: "Nice name" }, "name"],
  ])("refuses %j as invalid_request (400) naming %s", async (body, field) => {
    expectError(await create(body), 400, "invalid_request", field);
    expect((await flags()).json.data).toEqual([]);
  });

  it("accepts the longest key, 100 characters of letters, digits and dashes", async () => {
    const key = `0-${"a".repeat(98)}`;
    expect((await create({ key, type: "boolean" })).status).toBe(201);
  });

  it("takes boolean variations when they are exactly [true, false]", async () => {
    const answer = await create({ key: "b", type: "boolean", variations: [true, false] });
    expect([answer.status, answer.json.variations]).toEqual([201, [true, false]]);
  });
});

describe("request bodies", () => {
  it.each([
    ["no Content-Type", {}, 415, "unsupported_media_type"],
    ["Content-Type text/plain", { "content-type": "text/plain" }, 415, "unsupported_media_type"],
  ])("refuses a body with %s", async (_, headers, status, code) => {
    const answer = await call(emulator, "POST", `/projects/${project}/flags`, {
      raw: '{"key":"a","type":"boolean"}',
      headers,
    });
    expectError(answer, status, code);
  });

  it.each([
    ["not JSON", "{key:"],
    ["a JSON array", "[]"],
    ["JSON null", "null"],
  ])("refuses a body that is %s", async (_, raw) => {
    const answer = await call(emulator, "POST", `/projects/${project}/flags`, {
      raw,
      headers: { "content-type": "application/json; charset=utf-8" },
    });
    expectError(answer, 400, "invalid_request", "body");
  });

  it("refuses a body over 1 MiB with payload_too_large (413)", async () => {
    const answer = await call(emulator, "POST", `/projects/${project}/flags`, {
      raw: JSON.stringify({ key: "a", type: "boolean", tags: ["x".repeat(1024 * 1024)] }),
      headers: { "content-type": "application/json" },
    });
    expectError(answer, 413, "payload_too_large");
  });
});

describe("section 4: list flags", () => {
  async function make(n: number, tags: (i: number) => string[] = () => []) {
    for (let i = 1; i <= n; i++) {
      expect((await create({ key: `f${i}`, type: "boolean", tags: tags(i) })).status).toBe(201);
    }
  }

  it("lists newest first, in a page envelope with data and no next on the last page", async () => {
    await make(3);
    const answer = await flags();
    expect(answer.status).toBe(200);
    expect(Object.keys(answer.json)).toEqual(["data"]);
    expect(answer.json.data.map((f: any) => f.key)).toEqual(["f3", "f2", "f1"]);
  });

  it("gives list items the flag's fields, key, type and permanent among them", async () => {
    await create({ key: "one", type: "number", variations: [1, 2], tags: ["t"] });
    const [item] = (await flags()).json.data;
    expect(item).toMatchObject({ key: "one", type: "number", permanent: false, tags: ["t"], variations: [1, 2] });
    expect(Object.keys(item.environments)).toEqual(["production", "staging", "development"]);
  });

  it("answers an empty page for a project with no flags", async () => {
    expect((await flags()).json).toEqual({ data: [] });
  });

  it("pages by 20 by default and walks every flag exactly once through cursor and next", async () => {
    await make(45);
    const seen: string[] = [];
    const sizes: number[] = [];
    let query = "";
    for (;;) {
      const { json } = await flags(query);
      sizes.push(json.data.length);
      seen.push(...json.data.map((f: any) => f.key));
      if (!json.next) break;
      expect(typeof json.next).toBe("string");
      query = `?cursor=${encodeURIComponent(json.next)}`;
    }
    expect(sizes).toEqual([20, 20, 5]);
    expect(seen).toEqual(Array.from({ length: 45 }, (_, i) => `f${45 - i}`));
  });

  it("has no next when the last page is exactly full", async () => {
    await make(4);
    const first = (await flags("?limit=2")).json;
    expect(first.next).toBeDefined();
    const second = (await flags(`?limit=2&cursor=${first.next}`)).json;
    expect(second.data.map((f: any) => f.key)).toEqual(["f2", "f1"]);
    expect("next" in second).toBe(false);
  });

  it("keeps a cursor valid when flags are created or deleted between pages", async () => {
    await make(4);
    const first = (await flags("?limit=2")).json;
    await create({ key: "newer", type: "boolean" });
    await remove("f2");
    const second = (await flags(`?limit=2&cursor=${first.next}`)).json;
    expect(second.data.map((f: any) => f.key)).toEqual(["f1"]);
  });

  it.each(["1", "100"])("accepts limit=%s", async (limit) => {
    await make(2);
    const { json } = await flags(`?limit=${limit}`);
    expect(json.data.length).toBe(limit === "1" ? 1 : 2);
  });

  it.each(["0", "101", "-1", "1.5", "abc", "", "1e2"])("refuses limit=%j with invalid_request (400)", async (limit) => {
    expectError(await flags(`?limit=${limit}`), 400, "invalid_request", "limit");
  });

  it.each(["garbage", "ZmxhZ3M6MA", "ZmxhZ3M6eA", "dGFnczox"])("refuses cursor=%s", async (cursor) => {
    expectError(await flags(`?cursor=${cursor}`), 400, "invalid_request", "cursor");
  });

  it("refuses unknown and repeated query parameters", async () => {
    expectError(await flags("?page=2"), 400, "invalid_request", "page");
    expectError(await flags("?limit=1&limit=2"), 400, "invalid_request", "limit");
  });

  it("filters by tag", async () => {
    await make(5, (i) => (i % 2 ? ["odd"] : ["even", "x"]));
    expect((await flags("?tag=odd")).json.data.map((f: any) => f.key)).toEqual(["f5", "f3", "f1"]);
    expect((await flags("?tag=x&limit=1")).json.data.map((f: any) => f.key)).toEqual(["f4"]);
    expect((await flags("?tag=none")).json).toEqual({ data: [] });
  });

  it("pages through a tag filter", async () => {
    await make(6, (i) => (i % 2 ? ["odd"] : []));
    const first = (await flags("?tag=odd&limit=2")).json;
    const second = (await flags(`?tag=odd&limit=2&cursor=${first.next}`)).json;
    expect([...first.data, ...second.data].map((f: any) => f.key)).toEqual(["f5", "f3", "f1"]);
    expect(second.next).toBeUndefined();
  });

  it("lists as stale only flags unchanged for 30 days, and a change makes a flag fresh", async () => {
    await create({ key: "old", type: "boolean" });
    await create({ key: "touched", type: "boolean" });
    clock = new Date("2026-01-20T00:00:00.000Z");
    await create({ key: "young", type: "boolean" });
    clock = new Date("2026-01-30T23:59:59.000Z");
    expect((await flags("?stale=true")).json.data).toEqual([]);
    clock = new Date("2026-01-31T00:00:00.000Z");
    await update("touched", { environment: "staging", on: true });
    expect((await flags("?stale=true")).json.data.map((f: any) => f.key)).toEqual(["old"]);
    expect((await flags("?stale=false")).json.data.map((f: any) => f.key)).toEqual(["young", "touched", "old"]);
    expectError(await flags("?stale=yes"), 400, "invalid_request", "stale");
  });
});

describe("section 3 and 4: update a flag", () => {
  beforeEach(async () => {
    await create({ key: "f", type: "boolean" });
  });
  const envs = async () => (await flags()).json.data[0].environments;

  it("turns the flag on in one environment only and answers 200 with the flag", async () => {
    const answer = await update("f", { environment: "staging", on: true });
    expect(answer.status).toBe(200);
    expect(answer.json.environments).toEqual({
      production: { on: false },
      staging: { on: true },
      development: { on: false },
    });
    expect(await envs()).toEqual(answer.json.environments);
  });

  it("turns it off again", async () => {
    await update("f", { environment: "development", on: true });
    const answer = await update("f", { environment: "development", on: false });
    expect(answer.json.environments.development).toEqual({ on: false });
  });

  it("sets the rollout percent and leaves on as it was (omitted fields unchanged)", async () => {
    await update("f", { environment: "staging", on: true });
    const answer = await update("f", { environment: "staging", rollout: { percent: 25 } });
    expect(answer.json.environments.staging).toEqual({ on: true, rollout: { percent: 25 } });
    const again = await update("f", { environment: "staging", on: false });
    expect(again.json.environments.staging).toEqual({ on: false, rollout: { percent: 25 } });
    expect((await envs()).production).toEqual({ on: false });
  });

  it.each([0, 100, 12.5])("accepts rollout.percent %s", async (percent) => {
    const answer = await update("f", { environment: "development", rollout: { percent } });
    expect(answer.json.environments.development.rollout).toEqual({ percent });
  });

  it("takes on and rollout.percent in one request", async () => {
    const answer = await update("f", { environment: "staging", on: true, rollout: { percent: 50 } });
    expect(answer.json.environments.staging).toEqual({ on: true, rollout: { percent: 50 } });
  });

  it.each([
    [{ on: true }, "environment"],
    [{ environment: 3, on: true }, "environment"],
    [{ environment: "qa", on: true }, "qa"],
    [{ environment: "staging", on: "true" }, "on"],
    [{ environment: "staging", rollout: { percent: -1 } }, "rollout.percent"],
    [{ environment: "staging", rollout: { percent: 101 } }, "rollout.percent"],
    [{ environment: "staging", rollout: { percent: "50" } }, "rollout.percent"],
    [{ environment: "staging", rollout: {} }, "rollout.percent"],
    [{ environment: "staging", rollout: 50 }, "rollout"],
    [{ environment: "staging", rollout: { percent: 5, step: 1 } }, "step"],
    [{ environment: "staging", comment: 5 }, "comment"],
    [{ environment: "staging", enabled: true }, "enabled"],
  ])("refuses %j as invalid_request (400) naming %s, changing nothing", async (body, field) => {
    const before = await envs();
    expectError(await update("f", body), 400, "invalid_request", field);
    expect(await envs()).toEqual(before);
  });

  it("requires a comment in a protected environment (comment_required, 400) and takes one", async () => {
    expectError(await update("f", { environment: "production", on: true }), 400, "comment_required", "comment");
    expect((await envs()).production).toEqual({ on: false });
    const answer = await update("f", { environment: "production", on: true, comment: "launch" });
    expect(answer.json.environments.production).toEqual({ on: true });
  });

  it("answers not_found (404) for an unknown flag", async () => {
    expectError(await update("nope", { environment: "staging", on: true }), 404, "not_found", "nope");
  });

  it("answers the flag unchanged for a request that changes nothing", async () => {
    const answer = await update("f", { environment: "staging", on: false });
    expect([answer.status, answer.json.environments.staging]).toEqual([200, { on: false }]);
  });
});

describe("section 3 and 4: delete a flag", () => {
  it("deletes it in every environment with 204 and an empty body; then it is not found", async () => {
    await create({ key: "gone", type: "boolean" });
    await create({ key: "kept", type: "boolean" });
    const answer = await remove("gone");
    expect([answer.status, answer.text]).toEqual([204, ""]);
    expect((await flags()).json.data.map((f: any) => f.key)).toEqual(["kept"]);
    expectError(await update("gone", { environment: "staging", on: true }), 404, "not_found");
    expectError(await remove("gone"), 404, "not_found");
  });

  it("lets the key be used again, for a new flag switched off", async () => {
    await create({ key: "again", type: "boolean" });
    await update("again", { environment: "staging", on: true });
    await remove("again");
    const answer = await create({ key: "again", type: "boolean" });
    expect([answer.status, answer.json.environments.staging]).toEqual([201, { on: false }]);
  });
});

describe("section 4: webhooks", () => {
  it("creates a webhook with 201 and id, url, events and the secret", async () => {
    const answer = await hook({ url: "https://example.com/hooks", events: ["flag.updated", "flag.deleted"] });
    expect(answer.status).toBe(201);
    expect(Object.keys(answer.json).sort()).toEqual(["events", "id", "secret", "url"]);
    expect(answer.json).toMatchObject({ url: "https://example.com/hooks", events: ["flag.updated", "flag.deleted"] });
    expect(answer.json.id).toMatch(/^wh_[0-9a-f]{16}$/);
    expect(answer.json.secret).toMatch(/^whsec_[0-9a-f]{48}$/);
  });

  it("echoes the environments filter when given", async () => {
    const answer = await hook({ url: "http://localhost:3000/h", events: ["flag.updated"], environments: ["staging"] });
    expect(answer.json.environments).toEqual(["staging"]);
  });

  it("gives every webhook its own secret, and shows it nowhere after creation", async () => {
    const a = await hook({ url: "https://example.com/a", events: ["flag.updated"] });
    const b = await hook({ url: "https://example.com/a", events: ["flag.updated"] });
    expect(a.json.secret).not.toBe(b.json.secret);
    const state = await call(emulator, "GET", "/_emulator/state");
    expect(state.text).not.toContain(a.json.secret);
    expect(state.text).toContain(a.json.id);
  });

  it.each([
    [{ events: ["flag.updated"] }, "url"],
    [{ url: "not a url", events: ["flag.updated"] }, "url"],
    [{ url: "ftp://example.com/h", events: ["flag.updated"] }, "url"],
    [{ url: "http://example.com/h", events: ["flag.updated"] }, "https"],
    [{ url: "https://user:pw@example.com/h", events: ["flag.updated"] }, "credentials"],
    [{ url: "https://example.com/h" }, "events"],
    [{ url: "https://example.com/h", events: [] }, "events"],
    [{ url: "https://example.com/h", events: ["flag.renamed"] }, "events[0]"],
    [{ url: "https://example.com/h", events: ["flag.updated", "flag.updated"] }, "events"],
    [{ url: "https://example.com/h", events: ["flag.updated"], environments: [] }, "environments"],
    [{ url: "https://example.com/h", events: ["flag.updated"], environments: ["qa"] }, "environments[0]"],
    [{ url: "https://example.com/h", events: ["flag.updated"], secret: "mine" }, "secret"],
  ])("refuses %j as invalid_request (400) naming %s", async (body, field) => {
    expectError(await hook(body), 400, "invalid_request", field);
  });

  it.each(["http://localhost:3000/h", "http://127.0.0.1:3000/h", "http://[::1]:3000/h", "https://example.com/h"])(
    "accepts %s",
    async (url) => {
      expect((await hook({ url, events: ["flag.created"] })).status).toBe(201);
    },
  );

  it("deletes a webhook with 204 and an empty body; deleting it again is not_found (404)", async () => {
    const { json } = await hook({ url: "https://example.com/h", events: ["flag.updated"] });
    const answer = await call(emulator, "DELETE", `/projects/${project}/webhooks/${json.id}`);
    expect([answer.status, answer.text]).toEqual([204, ""]);
    expectError(await call(emulator, "DELETE", `/projects/${project}/webhooks/${json.id}`), 404, "not_found");
  });

  it("does not delete another project's webhook", async () => {
    const { json } = await hook({ url: "https://example.com/h", events: ["flag.updated"] });
    expectError(await call(emulator, "DELETE", `/projects/${project}-other/webhooks/${json.id}`), 404, "not_found");
  });
});

describe("routes the spec does not show", () => {
  it.each([
    ["GET", "/projects/a/flags/x", "PATCH, DELETE"],
    ["PUT", "/projects/a/flags", "GET, POST"],
    ["GET", "/projects/a/webhooks", "POST"],
    ["PATCH", "/projects/a/webhooks/wh_1", "DELETE"],
  ])("answers %s %s with method_not_allowed (405) and Allow", async (method, path, allow) => {
    const answer = await call(emulator, method, path);
    expectError(answer, 405, "method_not_allowed");
    expect(answer.headers.get("allow")).toBe(allow);
  });

  it.each(["/projects", "/projects/a", "/projects/a/rules", "/projects/a/flags/x/y", "/"])(
    "answers not_found (404) for %s",
    async (path) => {
      expectError(await call(emulator, "GET", path), 404, "not_found");
    },
  );

  it("refuses a project id that is not URL-safe", async () => {
    expectError(await call(emulator, "GET", "/projects/a%20b/flags"), 400, "invalid_request", "project");
  });

  it("answers nothing to a request addressed to another host name (DNS rebinding)", async () => {
    const { port } = new URL(emulator.url);
    const { request } = await import("node:http");
    const status = await new Promise<number>((resolve, reject) => {
      const req = request(
        { host: "127.0.0.1", port, path: "/", headers: { host: `attacker.example:${port}` } },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      );
      req.on("error", reject);
      req.end();
    });
    expect(status).toBe(403);
  });
});
