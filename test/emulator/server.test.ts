import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { type IncomingHttpHeaders, request } from "node:http";
import { connect } from "node:net";
import { networkInterfaces } from "node:os";
import { join } from "node:path";
import { createEmulator, type Emulator, type EmulatorOptions } from "flag-webhooks/emulator";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { cleanupAfterEach, tempDir as makeTempDir } from "../support/cleanup.js";
import { call, receiver, startEmulator, until } from "../support/emulator.js";

// The emulator's server over real sockets, where api.test.ts and messages.test.ts do not
// reach: request targets the URL parser cannot read,
// a client hanging up mid-body, the page's event stream (its headers, its delivery events, its
// keep-alive comment), the options and the state file's failures, and the routes' exact shapes.

let emulator: Emulator;
let port = 0;
beforeAll(async () => {
  emulator = await createEmulator({ retry: { attempts: 1 } });
  port = Number(new URL(emulator.url).port);
});
afterAll(() => emulator.close());

const cleanup = cleanupAfterEach();

const start = (options: EmulatorOptions = {}) => startEmulator(cleanup, options);

const tempDir = () => makeTempDir(cleanup, "emulator-server-");

/** Sends `head` (and `body`) as bytes on a fresh socket and reads the whole answer. */
function rawHttp(
  to: number,
  head: string,
  body = "",
  address = "127.0.0.1",
): Promise<{ status: number; json: any; text: string }> {
  return new Promise((resolve, reject) => {
    const socket = connect(to, address, () => socket.end(`${head}\r\nConnection: close\r\n\r\n${body}`));
    let text = "";
    socket.setEncoding("utf8");
    socket.on("data", (chunk: string) => {
      text += chunk;
    });
    socket.on("error", reject);
    socket.on("close", () => {
      const content = text.slice(text.indexOf("\r\n\r\n") + 4);
      let json: any;
      try {
        json = JSON.parse(content);
      } catch {
        json = undefined;
      }
      resolve({ status: Number(text.split(" ")[1]), json, text: content });
    });
  });
}

const error = (code: string, message: string) => ({ error: { code, message } });

describe("request targets", () => {
  it("answers 400 to a target the URL parser cannot read, and keeps serving", async () => {
    const host = `Host: 127.0.0.1:${port}`;
    for (const target of ["//[", "//a:b@/x", "http://[::1/"]) {
      const answer = await rawHttp(port, `GET ${target} HTTP/1.1\r\n${host}`);
      expect([target, answer.status, answer.json]).toEqual([
        target,
        400,
        error("invalid_request", "the request target is not a valid URL"),
      ]);
    }
    // The Host check comes first: a request for another host learns nothing about its target.
    const forged = await rawHttp(port, "GET //[ HTTP/1.1\r\nHost: attacker.example");
    expect([forged.status, forged.json.error.code]).toEqual([403, "forbidden"]);
    expect((await call(emulator, "GET", "/projects/p/flags")).status).toBe(200);
  });

  it("leaves no unhandled error when a client hangs up in the middle of a body, and keeps serving", async () => {
    const unhandled: unknown[] = [];
    const record = (reason: unknown) => unhandled.push(reason);
    process.on("unhandledRejection", record);
    try {
      await new Promise<void>((resolve) => {
        const socket = connect(port, "127.0.0.1", () => {
          socket.write(
            `POST /v2/projects/p/flags HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAuthorization: Bearer ${emulator.token}\r\n` +
              'Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"key":',
          );
          setTimeout(() => socket.destroy(), 50);
        });
        socket.on("error", () => {});
        socket.on("close", () => resolve());
      });
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect((await call(emulator, "GET", "/projects/p/flags")).status).toBe(200);
      expect(unhandled).toEqual([]);
    } finally {
      process.off("unhandledRejection", record);
    }
  });
});

describe("routes match whole paths only", () => {
  it("serves the API only at /v2/projects/…, not at a path that merely contains it", async () => {
    const answer = await call(emulator, "GET", "/x/projects/p/flags");
    expect([answer.status, answer.json]).toEqual([404, error("not_found", "no endpoint at /x/projects/p/flags")]);
  });

  it("serves the emulator's rollout and redelivery endpoints at their exact paths only", async () => {
    for (const where of [
      "/x/projects/p/flags/k/rollout-step",
      "/projects/p/flags/k/rollout-stepx",
      "/projects/p/flags/k/guard-triggered/x",
      "/x/deliveries/dlv_1/redeliver",
      "/deliveries/dlv_1/redeliverx",
      "/deliveries/dlv_1/tampered-copy/x",
    ]) {
      const answer = await call(emulator, "POST", `/_emulator${where}`, {
        body: { environment: "staging", percent: 5 },
      });
      expect([answer.status, answer.json]).toEqual([404, error("not_found", `no emulator endpoint at POST ${where}`)]);
    }
  });

  it("names the project segment whose percent-encoding is broken on the rollout endpoint", async () => {
    const answer = await call(emulator, "POST", "/_emulator/projects/%E0/flags/k/rollout-step", {
      body: { environment: "staging", percent: 5 },
    });
    expect([answer.status, answer.json]).toEqual([
      400,
      error("invalid_request", "project in the path is not valid percent-encoding"),
    ]);
  });

  it("serves the page to a navigation from another site: only the API and the emulator's endpoints check the origin", async () => {
    const origin = new URL(emulator.url).origin;
    const page = await fetch(`${origin}/`, {
      headers: { "sec-fetch-site": "cross-site", origin: "http://elsewhere.example" },
    });
    expect(page.status).toBe(200);
    expect(await page.text()).toContain("<title>flag-webhooks emulator</title>");
  });
});

/** Opens the page's event stream with node:http, which shows every response header. */
async function openStream(target: Emulator) {
  const origin = new URL(target.url);
  let text = "";
  const waiting: (() => void)[] = [];
  const { req, headers, status } = await new Promise<{
    req: ReturnType<typeof request>;
    headers: IncomingHttpHeaders;
    status: number;
  }>((resolve, reject) => {
    const req = request(
      {
        host: origin.hostname,
        port: origin.port,
        path: `/_emulator/events?token=${encodeURIComponent(target.token)}`,
        agent: false,
      },
      (res) => {
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => {
          text += chunk;
          for (const wake of waiting.splice(0)) wake();
        });
        resolve({ req, headers: res.headers, status: res.statusCode ?? 0 });
      },
    );
    req.on("error", reject);
    req.end();
  });
  const readUntil = async (needle: string): Promise<string> => {
    const deadline = Date.now() + 5000;
    while (!text.includes(needle)) {
      if (Date.now() > deadline) throw new Error(`the stream never said ${JSON.stringify(needle)}: ${text}`);
      await new Promise<void>((resolve) => {
        waiting.push(resolve);
        setTimeout(resolve, 50);
      });
    }
    return text;
  };
  return { status, headers, readUntil, close: () => req.destroy() };
}

describe("the page's event stream", () => {
  it("is kept alive, and tells each change of a delivery as a delivery event", async () => {
    const app = await receiver(() => 204);
    cleanup(app.close);
    const stream = await openStream(emulator);
    cleanup(stream.close);
    expect(stream.status).toBe(200);
    expect(stream.headers.connection).toBe("keep-alive");
    const hook = await call(emulator, "POST", "/projects/streamed/webhooks", {
      body: { url: app.url, events: ["flag.created"], environments: ["staging"] },
    });
    expect(hook.status).toBe(201);
    expect(
      (await call(emulator, "POST", "/projects/streamed/flags", { body: { key: "s", type: "boolean" } })).status,
    ).toBe(201);
    const text = await stream.readUntil('"state":"succeeded"');
    const deliveries = text
      .split("\n\n")
      .filter((part) => part.startsWith("event: delivery\ndata: "))
      .map((part) => JSON.parse(part.slice("event: delivery\ndata: ".length)));
    expect(deliveries.map((d) => [d.webhookId, d.event.type, d.state])).toEqual([
      [hook.json.id, "flag.created", "pending"],
      [hook.json.id, "flag.created", "succeeded"],
    ]);
  });

  it("sends a comment every 15 seconds, so that proxies keep an idle stream open", async () => {
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval"] });
    try {
      const quiet = await createEmulator();
      try {
        const stream = await openStream(quiet);
        try {
          await stream.readUntil("retry: 1000\n\n");
          vi.advanceTimersByTime(14_999);
          vi.advanceTimersByTime(1);
          expect(await stream.readUntil(": keep-alive\n\n")).toBe("retry: 1000\n\n: keep-alive\n\n");
        } finally {
          stream.close();
        }
      } finally {
        await quiet.close();
      }
    } finally {
      vi.useRealTimers();
    }
  });
});

describe("options", () => {
  it("refuses a token that is not a string, even one whose digits would pass", async () => {
    await expect(createEmulator({ token: 123456789 as unknown as string })).rejects.toThrow(
      'flag-webhooks/emulator: option "token" must be 8 to 200 visible ASCII characters',
    );
  });

  it("takes staleAfterDays", async () => {
    let clock = new Date("2026-03-01T00:00:00.000Z");
    const quick = await start({ staleAfterDays: 2, now: () => clock });
    expect((await call(quick, "POST", "/projects/p/flags", { body: { key: "old", type: "boolean" } })).status).toBe(
      201,
    );
    clock = new Date("2026-03-02T00:00:00.000Z");
    expect((await call(quick, "GET", "/projects/p/flags?stale=true")).json.data).toEqual([]);
    clock = new Date("2026-03-03T00:00:01.000Z");
    const stale = await call(quick, "GET", "/projects/p/flags?stale=true");
    expect(stale.json.data.map((f: { key: string }) => f.key)).toEqual(["old"]);
  });

  it("gives the URLs of an IPv6 address it listens on", async () => {
    const six = await start({ host: "::1" });
    expect(six.url).toMatch(/^http:\/\/\[::1\]:\d+\/v2$/);
    expect(six.pageUrl).toBe(`${new URL(six.url).origin}/#token=${encodeURIComponent(six.token)}`);
  });

  it("refuses to start on a port in use, with the system's error", async () => {
    const taken = await start();
    const refused = await createEmulator({ port: Number(new URL(taken.url).port) }).catch((failure) => failure);
    expect((refused as NodeJS.ErrnoException).code).toBe("EADDRINUSE");
  });

  it("can be closed twice", async () => {
    const twice = await createEmulator();
    await twice.close();
    await twice.close();
    expect(await fetch(twice.url).catch((failure: Error) => failure.name)).toBe("TypeError");
  });
});

const external = Object.values(networkInterfaces())
  .flat()
  .find((i) => i && i.family === "IPv4" && !i.internal)?.address;

describe("the Host check", () => {
  it.runIf(external)(
    "bound to loopback, refuses a Host naming another address of this machine (runs only when it has one)",
    async () => {
      const loopback = await start();
      const to = Number(new URL(loopback.url).port);
      const answer = await rawHttp(to, `GET /v2/projects/p/flags HTTP/1.1\r\nHost: ${external}:${to}`);
      expect([answer.status, answer.json?.error.code]).toEqual([403, "forbidden"]);
    },
  );

  it.runIf(process.getuid?.() === 0)(
    "on port 80, answers a Host without a port, as browsers send it (runs as root, which may listen on 80)",
    async () => {
      const web = await start({ host: "127.80.80.80", port: 80 });
      expect(web.url).toBe("http://127.80.80.80:80/v2");
      for (const host of ["127.80.80.80", "127.80.80.80:80", "localhost"]) {
        const answer = await rawHttp(
          80,
          `GET /v2/projects/p/flags HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${web.token}`,
          "",
          "127.80.80.80",
        );
        expect([host, answer.status]).toEqual([host, 200]);
      }
      const other = await rawHttp(80, "GET / HTTP/1.1\r\nHost: 127.80.80.80:81", "", "127.80.80.80");
      expect(other.status).toBe(403);
    },
  );
});

describe("the state file", () => {
  const valid = { version: 1, token: "state-token-1", seq: 0, projects: [], deliveries: [] };
  const cannotRead = (file: string, why: string) =>
    `flag-webhooks/emulator: option "stateFile": cannot read the state file ${file}: ${why}`;

  it("refuses a path that is not a string", async () => {
    await expect(createEmulator({ stateFile: 42 as unknown as string })).rejects.toThrow(
      new TypeError(cannotRead("42", "it must be a file path")),
    );
  });

  it("refuses a token that is not a string, and says why JSON does not parse", async () => {
    const dir = tempDir();
    const file = join(dir, "state.json");
    writeFileSync(file, JSON.stringify({ ...valid, token: 123456789 }));
    await expect(createEmulator({ stateFile: file })).rejects.toThrow(
      new TypeError(cannotRead(file, "its token is not valid")),
    );
    writeFileSync(file, "{ not json");
    const refused = await createEmulator({ stateFile: file }).catch((failure: TypeError) => failure);
    expect((refused as TypeError).message).toMatch(/: it is not JSON \(.+\)$/);
    expect((refused as TypeError).cause).toBeInstanceOf(SyntaxError);
  });

  it("names the system's error code for any other reason it cannot read, with the error as its cause", async () => {
    const dir = tempDir();
    const plain = join(dir, "plain");
    writeFileSync(plain, "a file, not a folder");
    const file = join(plain, "state.json");
    const refused = await createEmulator({ stateFile: file }).catch((failure: TypeError) => failure);
    expect(refused).toEqual(new TypeError(cannotRead(file, "ENOTDIR")));
    expect(((refused as TypeError).cause as NodeJS.ErrnoException).code).toBe("ENOTDIR");
  });

  it("is written at start, and a state file that cannot be written is refused at start, naming why", async () => {
    const dir = tempDir();
    const file = join(dir, "state.json");
    await start({ stateFile: file });
    expect(JSON.parse(readFileSync(file, "utf8")).version).toBe(1);
    // Its temporary name (.<name>.<12 hex>.tmp) is longer than a file name may be.
    const long = join(dir, `${"s".repeat(245)}.json`);
    const refused = await createEmulator({ stateFile: long }).catch((failure: TypeError) => failure);
    expect(refused).toEqual(
      new TypeError(`flag-webhooks/emulator: option "stateFile": cannot write the state file ${long}: ENAMETOOLONG`),
    );
    expect(((refused as TypeError).cause as NodeJS.ErrnoException).code).toBe("ENAMETOOLONG");
    expect(readdirSync(dir)).toEqual(["state.json"]);
  });

  it("is not written again once the emulator is closed, not even by a second close", async () => {
    const dir = tempDir();
    const file = join(dir, "state.json");
    const saved = await createEmulator({ stateFile: file });
    await saved.close();
    rmSync(file);
    await saved.close();
    expect(existsSync(file)).toBe(false);
  });

  it.runIf(process.getuid?.() !== 0)(
    "says permission denied for a state file it may not read (runs only without root, which may read any file)",
    async () => {
      const dir = tempDir();
      const file = join(dir, "state.json");
      writeFileSync(file, JSON.stringify(valid));
      chmodSync(file, 0);
      await expect(createEmulator({ stateFile: file })).rejects.toThrow(
        new TypeError(cannotRead(file, "permission denied")),
      );
    },
  );

  it("answers 409 to a redelivery whose project is not in the state any more", async () => {
    const dir = tempDir();
    const file = join(dir, "state.json");
    const delivery = {
      id: "dlv_0000000000000001",
      kind: "event",
      project: "gone",
      webhookId: "wh_1",
      url: "http://127.0.0.1:9/webhooks",
      event: { id: "evt_1", type: "flag.created", environment: "staging" },
      createdAt: "2026-03-01T00:00:00.000Z",
      request: { headers: { "content-type": "application/json" }, body: "{}" },
      attempts: [],
      state: "failed",
    };
    writeFileSync(file, JSON.stringify({ ...valid, deliveries: [delivery] }));
    const restored = await start({ stateFile: file });
    const answer = await call(restored, "POST", `/_emulator/deliveries/${delivery.id}/redeliver`);
    expect([answer.status, answer.json]).toEqual([409, error("webhook_deleted", "the delivery's webhook was deleted")]);
  });
});

describe("writing the state file", () => {
  const warnings: string[] = [];
  const record = (warning: Error) => {
    if (warning.message.startsWith("flag-webhooks/emulator: could not save")) warnings.push(warning.message);
  };
  beforeAll(() => {
    process.on("warning", record);
  });
  afterAll(() => {
    process.off("warning", record);
  });
  afterEach(() => {
    warnings.length = 0;
  });

  it("writes a burst of changes once, and warns (without stopping) when that write fails, and again at close", async () => {
    const dir = tempDir();
    const file = join(dir, "state.json");
    const app = await receiver(() => "hang");
    cleanup(app.close);
    const saving = await createEmulator({ stateFile: file, retry: { attempts: 1 } });
    let closed = false;
    cleanup(() => (closed ? undefined : saving.close()));
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const hook = await call(saving, "POST", "/projects/p/webhooks", {
        body: { url: app.url, events: ["flag.created"] },
      });
      ids.push(hook.json.id);
    }
    await until(() => ids.every((id) => readFileSync(file, "utf8").includes(id)));
    await new Promise((resolve) => setTimeout(resolve, 150));
    rmSync(dir, { recursive: true, force: true });
    // One flag, three environments, three webhooks: the change and nine new deliveries.
    expect((await call(saving, "POST", "/projects/p/flags", { body: { key: "f", type: "boolean" } })).status).toBe(201);
    await until(() => app.requests.length === 9);
    await until(() => warnings.length > 0);
    await new Promise((resolve) => setTimeout(resolve, 250));
    expect(warnings).toEqual([expect.stringContaining(`could not save ${file}: Error: ENOENT`)]);
    // Still serving.
    expect((await call(saving, "GET", "/projects/p/flags")).json.data.length).toBe(1);
    closed = true;
    await saving.close();
    expect(warnings.length).toBe(2);
    expect(warnings[1]).toContain(`flag-webhooks/emulator: could not save ${file}: Error: ENOENT`);
  });

  it("leaves no temporary file behind when the rename fails, and warns", async () => {
    const dir = tempDir();
    const file = join(dir, "state.json");
    const saving = await start({ stateFile: file });
    // The state file's path becomes a folder that is not empty: a rename over it fails.
    rmSync(file);
    mkdirSync(file);
    writeFileSync(join(file, "keep"), "");
    expect((await call(saving, "POST", "/projects/p/flags", { body: { key: "f", type: "boolean" } })).status).toBe(201);
    await until(() => warnings.length > 0);
    expect(warnings[0]).toContain(`could not save ${file}`);
    expect(readdirSync(dir)).toEqual(["state.json"]);
  });

  it("writes at most once per 100 ms: a change right after a write waits for the rest", async () => {
    const dir = tempDir();
    const file = join(dir, "state.json");
    const before = performance.now();
    const saving = await start({ stateFile: file });
    expect(existsSync(file)).toBe(true);
    expect((await call(saving, "POST", "/projects/p/flags", { body: { key: "late", type: "boolean" } })).status).toBe(
      201,
    );
    await until(() => readFileSync(file, "utf8").includes('"late"'));
    // The start wrote the file at `before` or later; the next write came 100 ms after it at the earliest.
    expect(performance.now() - before).toBeGreaterThanOrEqual(99);
  });
});
