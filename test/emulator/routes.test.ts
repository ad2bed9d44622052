import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { createEmulator, type Emulator } from "flag-webhooks/emulator";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

// docs/emulator.md's list of the emulator's routes against the emulator itself: every row has one
// curl example, every example runs and answers the row's status, and on every listed path the
// emulator allows exactly the listed methods.

const page = readFileSync(resolve(import.meta.dirname, "../../docs/emulator.md"), "utf8");
const section = page.slice(page.indexOf("### Routes"), page.indexOf("**Where the interface document is silent**"));

interface Route {
  method: string;
  path: string;
  status: number;
}

const routes: Route[] = [
  ...section.matchAll(/^\| `(GET|POST|PATCH|DELETE)` +\| `([^`]+)` +\|[^|]*(?:\\\|[^|]*)*\| `(\d{3})`/gm),
].map(([, method, path, status]) => ({ method: method as string, path: path as string, status: Number(status) }));

const script = /```sh\n([\s\S]*?)```/.exec(section)?.[1] ?? "";
const lines = script.split("\n");
const examples = lines.flatMap((line, i) => {
  const route = /^# (GET|POST|PATCH|DELETE) (\S+)$/.exec(line);
  const next = lines[i + 1] ?? "";
  return route && next.startsWith("curl ")
    ? [{ method: route[1] as string, path: route[2] as string, curl: next }]
    : [];
});
const assignments = lines.flatMap((line) => {
  const match = /^([A-Z]+)=("[^"]*"|\S+)/.exec(line);
  return match ? [[match[1] as string, match[2] as string] as const] : [];
});

/** Splits a command line as sh does for the quoting used here: '…' literal, "…" and bare words expand $VAR. */
function words(line: string, vars: (name: string) => string): string[] {
  const out: string[] = [];
  const expand = (text: string) => text.replace(/\$(\w+)|\$\{(\w+)\}/g, (_, a, b) => vars(a ?? b));
  for (const [, single, double, bare] of line.matchAll(/'([^']*)'|"([^"]*)"|(\S+)/g)) {
    out.push(single ?? expand(double ?? bare ?? ""));
  }
  return out;
}

let emulator: Emulator;
beforeAll(async () => {
  emulator = await createEmulator({ retry: { attempts: 1, timeoutMs: 1000 } });
});
afterAll(() => emulator.close());

describe("docs/emulator.md's list of the emulator's routes", () => {
  it("lists routes, each with exactly one curl example", () => {
    expect(routes.length).toBeGreaterThanOrEqual(12);
    const listed = routes.map((r) => `${r.method} ${r.path}`).sort();
    expect(new Set(listed).size).toBe(listed.length);
    expect(examples.map((e) => `${e.method} ${e.path}`).sort()).toEqual(listed);
  });

  it("runs every curl example against an emulator, and each answers the status the list says", async () => {
    const origin = new URL(emulator.url).origin;
    const values = new Map<string, string>([
      ["TOKEN", emulator.token],
      ["API", emulator.url],
      ["EMU", `${origin}/_emulator`],
    ]);
    const vars = (name: string): string => {
      if (name === "DELIVERY") return emulator.deliveries()[0]?.id ?? "";
      const value = values.get(name);
      if (value === undefined) throw new Error(`docs/emulator.md's example uses $${name}, which it does not set`);
      return value;
    };
    for (const [name, raw] of assignments) {
      if (!values.has(name)) values.set(name, words(raw, vars)[0] ?? "");
    }
    for (const example of examples) {
      const [curl, ...args] = words(example.curl, vars);
      expect(curl).toBe("curl");
      let method = "GET";
      let url = "";
      let body: string | undefined;
      const headers = new Headers();
      for (let i = 0; i < args.length; i++) {
        const arg = args[i] as string;
        if (arg === "-X") method = args[++i] as string;
        else if (arg === "-H") {
          const [name, ...rest] = (args[++i] as string).split(":");
          headers.set(name as string, rest.join(":").trim());
        } else if (arg === "-d") body = args[++i];
        else if (arg === "-N") continue;
        else if (arg.startsWith("-")) throw new Error(`unexpected curl option ${arg} in docs/emulator.md`);
        else url = arg;
      }
      expect(`${method} ${url.replace(origin, "")}`).toMatch(
        new RegExp(`^${example.method} ${example.path.replace(/\{\w+\}/g, "[^/?]+")}(\\?.*)?$`),
      );
      const controller = new AbortController();
      const response = await fetch(url, { method, headers, body, signal: controller.signal });
      const type = response.headers.get("content-type") ?? "";
      const text = type.startsWith("text/event-stream") ? "" : await response.text();
      controller.abort(); // the event stream never ends
      const route = routes.find((r) => r.method === example.method && r.path === example.path);
      expect([example.curl, response.status, text]).toEqual([example.curl, route?.status, text]);
      if (example.path.endsWith("/webhooks") && method === "POST") values.set("WEBHOOK", JSON.parse(text).id);
      await emulator.settled();
    }
  });

  it("allows on each listed path exactly the listed methods, and serves no other path", async () => {
    const origin = new URL(emulator.url).origin;
    const byPath = new Map<string, string[]>();
    for (const route of routes) byPath.set(route.path, [...(byPath.get(route.path) ?? []), route.method]);
    for (const [path, methods] of byPath) {
      const concrete = path.replace(/\{(\w+)\}/g, (_, name) => (name === "project" ? "p" : `x-${name}`));
      const answer = await fetch(origin + concrete, {
        method: "PUT",
        headers: { authorization: `Bearer ${emulator.token}` },
      });
      const allowed = (answer.headers.get("allow") ?? "").split(", ").sort();
      expect([path, answer.status, allowed]).toEqual([path, 405, [...methods].sort()]);
    }
    for (const path of [
      "/v2/projects/p/webhooks/x/y",
      "/v2/projects/p",
      "/v2/projects/p/rules",
      "/_emulator/projects/p/flags/k/archive",
      "/_emulator/deliveries/x",
      "/_emulator/nothing",
    ]) {
      const answer = await fetch(origin + path, { headers: { authorization: `Bearer ${emulator.token}` } });
      expect([path, answer.status]).toEqual([path, 404]);
    }
  });
});
