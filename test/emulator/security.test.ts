import {
  chmodSync,
  existsSync,
  lstatSync,
  readdirSync,
  readFileSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { request } from "node:http";
import { networkInterfaces } from "node:os";
import { join } from "node:path";
import { createEmulator, type Emulator, type EmulatorOptions } from "flag-webhooks/emulator";
import { describe, expect, it } from "vitest";
import { cleanupAfterEach, tempDir as makeTempDir } from "../support/cleanup.js";
import { call, receiver, startEmulator, until } from "../support/emulator.js";

// The emulator runs on developers' machines and inside their test processes: what a web page,
// another process or a planted file can make it do. The Host check against DNS rebinding, the
// token given only to who knows it, request strings that never index a plain object, the state
// file's permissions and links, and bounds on the history and on each write of the state file.

const cleanup = cleanupAfterEach();

const start = (options: EmulatorOptions = {}) => startEmulator(cleanup, options);

const tempDir = () => makeTempDir(cleanup, "emulator-security-");

interface Raw {
  status: number;
  body: string;
}

/** One request over a real socket to `address`, with the Host header (and others) as given. */
function raw(
  address: string,
  port: number,
  options: { method?: string; path?: string; headers?: Record<string, string>; body?: string },
): Promise<Raw> {
  // Host "" means none at all: node:http would otherwise add one.
  const omitHost = options.headers?.host === "";
  const headers = { ...options.headers };
  if (omitHost) delete headers.host;
  return new Promise((resolve, reject) => {
    const req = request(
      { host: address, port, method: options.method ?? "GET", path: options.path ?? "/", headers, setHost: !omitHost },
      (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => {
          body += chunk;
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on("error", reject);
    req.end(options.body);
  });
}

const portOf = (emulator: Emulator) => Number(new URL(emulator.url).port);

/** A non-loopback IPv4 address of this machine, when it has one. */
const external = Object.values(networkInterfaces())
  .flat()
  .find((i) => i && i.family === "IPv4" && !i.internal)?.address;

describe("the Host check (DNS rebinding), whatever the bind address", () => {
  // [bind address, address to connect to, a Host that names it]
  const binds: [string, string, string][] = [
    ["127.0.0.1", "127.0.0.1", "127.0.0.1"],
    ["127.1", "127.0.0.1", "127.1"],
    ["0:0:0:0:0:0:0:1", "::1", "[::1]"],
    ["::ffff:127.0.0.1", "::ffff:127.0.0.1", "[::ffff:127.0.0.1]"],
    ["0.0.0.0", "127.0.0.1", "localhost"],
  ];
  if (external) binds.push([external, external, external], ["0.0.0.0", external, external]);

  it.each(binds)(
    "bound to %s: refuses Host attacker.example (page and API), answers a Host naming it",
    async (host, address, name) => {
      const emulator = await start({ host });
      const port = portOf(emulator);
      const attacker = { host: `attacker.example:${port}` };
      const page = await raw(address, port, { headers: attacker });
      expect(page.status).toBe(403);
      expect(JSON.parse(page.body).error.code).toBe("forbidden");
      expect(page.body).not.toContain(emulator.token);
      const created = await raw(address, port, {
        method: "POST",
        path: "/v2/projects/default/webhooks",
        headers: { ...attacker, authorization: `Bearer ${emulator.token}`, "content-type": "application/json" },
        body: JSON.stringify({ url: "https://attacker.example/hook", events: ["flag.updated"] }),
      });
      expect([created.status, created.body]).not.toContain(201);
      expect(created.status).toBe(403);
      expect(created.body).not.toContain("whsec_");
      // A loopback name or the bind address, with the right port, is answered.
      expect((await raw(address, port, { headers: { host: `${name}:${port}` } })).status).toBe(200);
      expect((await raw(address, port, { headers: { host: `localhost:${port}` } })).status).toBe(200);
      // The right name on another port is another origin.
      expect((await raw(address, port, { headers: { host: `${name}:${port === 1 ? 2 : port - 1}` } })).status).toBe(
        403,
      );
    },
  );

  it("refuses rebinding names that merely contain a loopback name, and a missing Host", async () => {
    const emulator = await start();
    const port = portOf(emulator);
    for (const host of [
      `127.0.0.1.attacker.example:${port}`,
      `localhost.attacker.example:${port}`,
      `attacker.example:${port}@127.0.0.1`,
      `127.0.0.1:${port}/`,
    ]) {
      const answer = await raw("127.0.0.1", port, { headers: { host } });
      expect([host, answer.status]).toEqual([host, 403]);
    }
    // No Host at all: node:http itself answers 400 (HTTP/1.1 requires it); never the page.
    const none = await raw("127.0.0.1", port, { headers: { host: "" } });
    expect(none.status).toBe(400);
    // Any spelling of loopback is one host: the URL parser reads them all as 127.0.0.1 or [::1].
    for (const host of [`127.1:${port}`, `0x7f.0.0.1:${port}`, `LOCALHOST:${port}`, `[0:0:0:0:0:0:0:1]:${port}`]) {
      expect([host, (await raw("127.0.0.1", port, { headers: { host } })).status]).toEqual([host, 200]);
    }
  });
});

describe("the token is given only to who already knows it", () => {
  it("serves the page's HTML without the token; the printed page URL carries it in the fragment", async () => {
    const emulator = await start();
    const root = new URL("/", emulator.pageUrl).href;
    expect(emulator.pageUrl).toBe(`${root}#token=${emulator.token}`);
    const html = await fetch(root).then((res) => res.text());
    expect(html).toContain("<title>flag-webhooks emulator</title>");
    expect(html).not.toContain(emulator.token);
    for (const file of ["page.js", "page.css"]) {
      expect(await fetch(root + file).then((res) => res.text())).not.toContain(emulator.token);
    }
    // And the token does not open the API by itself from another origin's page.
    const state = await call(emulator, "GET", "/_emulator/state", { token: null });
    expect(state.status).toBe(401);
  });

  it("refuses API calls a browser marks as coming from another origin, even with the token", async () => {
    const emulator = await start();
    const body = { url: "https://example.com/hook", events: ["flag.updated"] };
    const own = new URL(emulator.url).origin;
    const refused: Record<string, string>[] = [
      { origin: "http://attacker.example" },
      { origin: "null" },
      { origin: own.replace("127.0.0.1", "localhost") },
      { "sec-fetch-site": "cross-site" },
      { "sec-fetch-site": "same-site" },
    ];
    for (const headers of refused) {
      const answer = await call(emulator, "POST", "/projects/default/webhooks", { body, headers });
      expect([headers, answer.status, answer.json.error.code]).toEqual([headers, 403, "forbidden"]);
      const stream = await call(emulator, "POST", "/_emulator/projects/default/flags/f/rollout-step", {
        body: { environment: "production", percent: 5 },
        headers,
      });
      expect(stream.status).toBe(403);
    }
    // The page's own calls (same origin) and calls from programs (no Origin) are answered.
    expect((await call(emulator, "POST", "/projects/default/webhooks", { body })).status).toBe(201);
    const same = await call(emulator, "POST", "/projects/default/webhooks", {
      body,
      headers: { origin: own, "sec-fetch-site": "same-origin" },
    });
    expect(same.status).toBe(201);
  });
});

describe("no request string indexes a plain object (prototype pollution)", () => {
  const names = ["__proto__", "constructor", "toString", "hasOwnProperty", "valueOf", "prototype"];

  it.each(names)("refuses the environment %j with 400 everywhere, and Object.prototype stays clean", async (name) => {
    const emulator = await start({ retry: { attempts: 1 } });
    await call(emulator, "POST", "/projects/p/flags", { body: { key: "f", type: "boolean" } });
    const answers = [
      await call(emulator, "PATCH", "/projects/p/flags/f", { body: { environment: name, on: true } }),
      await call(emulator, "PATCH", "/projects/p/flags/f", { body: { environment: name, rollout: { percent: 40 } } }),
      await call(emulator, "POST", "/_emulator/projects/p/flags/f/rollout-step", {
        body: { environment: name, percent: 30 },
      }),
      await call(emulator, "POST", "/_emulator/projects/p/flags/f/guard-triggered", {
        body: { environment: name, action: "rolled_back" },
      }),
    ];
    for (const answer of answers) {
      expect([answer.status, answer.json.error.code]).toEqual([400, "invalid_request"]);
      expect(answer.json.error.message).toContain("is not an environment of this project");
    }
    const plain: Record<string, unknown> = {};
    expect([plain.on, plain.rollout, Object.hasOwn(Object.prototype, "on")]).toEqual([undefined, undefined, false]);
    // A fresh flag given only a rollout stays off, and its event says so.
    await call(emulator, "POST", "/projects/p/flags", { body: { key: "g", type: "boolean" } });
    const updated = await call(emulator, "PATCH", "/projects/p/flags/g", {
      body: { environment: "production", rollout: { percent: 10 } },
    });
    expect(updated.json.environments.production).toEqual({ on: false, rollout: { percent: 10 } });
    const { json } = await call(emulator, "GET", "/projects/p/flags");
    expect(json.data.map((f: { environments: object }) => Object.keys(f.environments))).toEqual([
      ["production", "staging", "development"],
      ["production", "staging", "development"],
    ]);
  });

  it("refuses a webhook for an environment named like a prototype member", async () => {
    const emulator = await start();
    for (const name of names) {
      const answer = await call(emulator, "POST", "/projects/p/webhooks", {
        body: { url: "https://example.com/h", events: ["flag.updated"], environments: [name] },
      });
      expect([name, answer.status]).toEqual([name, 400]);
    }
  });

  it("serves nothing for paths named like prototype members", async () => {
    const emulator = await start();
    const root = new URL(emulator.url).origin;
    for (const name of ["/__proto__", "/constructor", "/toString", "/hasOwnProperty"]) {
      expect([name, (await fetch(root + name)).status]).toEqual([name, 404]);
    }
  });
});

describe("the state file", () => {
  it("never writes through a link planted beside it or at its path; always 0600; no temporary file left", async () => {
    const dir = tempDir();
    const stateFile = join(dir, "state.json");
    const victim = join(dir, "victim.txt");
    writeFileSync(victim, "precious\n", { mode: 0o644 });
    symlinkSync(victim, `${stateFile}.tmp`);
    const first = await start({ stateFile });
    await call(first, "POST", "/projects/p/flags", { body: { key: "f", type: "boolean" } });
    await first.close();
    expect(readFileSync(victim, "utf8")).toBe("precious\n");
    expect(statSync(victim).mode & 0o777).toBe(0o644);
    expect(statSync(stateFile).mode & 0o777).toBe(0o600);
    expect(readFileSync(stateFile, "utf8")).toContain(first.token);

    // A file made readable by others is 0600 again after the next write.
    chmodSync(stateFile, 0o644);
    const second = await start({ stateFile });
    await call(second, "PATCH", "/projects/p/flags/f", { body: { environment: "staging", on: true } });
    await second.close();
    expect(statSync(stateFile).mode & 0o777).toBe(0o600);

    // A dangling link at the path itself is replaced by the file, never followed to create its target.
    const elsewhere = join(dir, "elsewhere.json");
    const linked = join(dir, "linked.json");
    symlinkSync(elsewhere, linked);
    const third = await start({ stateFile: linked });
    await third.close();
    expect(existsSync(elsewhere)).toBe(false);
    expect(lstatSync(linked).isFile()).toBe(true);
    expect(statSync(linked).mode & 0o777).toBe(0o600);
    expect(readdirSync(dir).sort()).toEqual(["linked.json", "state.json", "state.json.tmp", "victim.txt"]);
  });

  it("sends none of the stored pending deliveries when a start fails", async () => {
    const app = await receiver(() => 500);
    cleanup(app.close);
    const stateFile = join(tempDir(), "state.json");
    const first = await start({ stateFile, retry: { initialDelayMs: 60_000 } });
    await call(first, "POST", "/projects/p/webhooks", { body: { url: app.url, events: ["flag.created"] } });
    await call(first, "POST", "/projects/p/flags", { body: { key: "f", type: "boolean" } });
    await until(() => app.requests.length === 3);
    await first.close();
    expect(JSON.parse(readFileSync(stateFile, "utf8")).deliveries.map((d: { state: string }) => d.state)).toEqual([
      "pending",
      "pending",
      "pending",
    ]);
    await expect(createEmulator({ stateFile, host: "not an address" })).rejects.toThrow(/option "host"/);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(app.requests.length).toBe(3);
  });

  it("refuses a folder that does not exist, at start, naming it", async () => {
    const dir = tempDir();
    await expect(createEmulator({ stateFile: join(dir, "nope/state.json") })).rejects.toThrow(
      `option "stateFile": cannot read the state file ${join(dir, "nope/state.json")}: its folder ${join(dir, "nope")} does not exist`,
    );
  });
});

describe("the delivery history is bounded, and so is a write of the state file", () => {
  it("keeps the last maxDeliveries deliveries, in memory, on the page and in the state file, of a constant size", async () => {
    const app = await receiver(() => 204);
    cleanup(app.close);
    const stateFile = join(tempDir(), "state.json");
    const emulator = await start({ stateFile, maxDeliveries: 5 });
    await call(emulator, "POST", "/projects/p/webhooks", {
      body: { url: app.url, events: ["flag.updated"], environments: ["staging"] },
    });
    await call(emulator, "POST", "/projects/p/flags", { body: { key: "f", type: "boolean" } });
    const sizes: number[] = [];
    for (let change = 1; change <= 40; change++) {
      await call(emulator, "PATCH", "/projects/p/flags/f", { body: { environment: "staging", on: change % 2 === 1 } });
      await emulator.settled();
      if (change % 10 === 0) {
        await new Promise((resolve) => setTimeout(resolve, 150)); // one save interval
        sizes.push(statSync(stateFile).size);
      }
    }
    // Each of the 40 changes delivered; an attempt whose answer the connection lost is sent again
    // with the same event id, as a sender does (once in a loaded CI run: 42 requests for 40 events).
    expect(new Set(app.requests.map((request) => JSON.parse(request.body).id)).size).toBe(40);
    const kept = emulator.deliveries();
    expect(kept.length).toBe(5);
    // The newest five, oldest first.
    expect(kept.map((d) => JSON.parse(d.request.body).data.changes[0].to)).toEqual([false, true, false, true, false]);
    expect(JSON.parse(app.requests.at(-1)?.body ?? "").id).toBe(kept.at(-1)?.event.id);
    const state = await call(emulator, "GET", "/_emulator/state");
    expect(state.json.deliveries.length).toBe(5);
    expect(JSON.parse(readFileSync(stateFile, "utf8")).deliveries.length).toBe(5);
    // 10, 20, 30, 40 changes: the same bytes per write (ids and timings vary by a few bytes).
    const [first = 0] = sizes;
    for (const size of sizes) expect(Math.abs(size - first)).toBeLessThan(first * 0.02);
  });

  it("refuses a bound that is not a positive integer", async () => {
    for (const maxDeliveries of [0, -1, 1.5, Number.NaN]) {
      await expect(createEmulator({ maxDeliveries })).rejects.toThrow(/option "maxDeliveries"/);
    }
  });

  it("refuses a token that could never authenticate (spaces, control characters)", async () => {
    for (const token of ["has a space", "tab\tinside!", "new\nline-token", "é-not-ascii-token"]) {
      await expect(createEmulator({ token })).rejects.toThrow(/option "token"/);
    }
  });
});
