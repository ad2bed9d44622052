/**
 * The shared case table (test/support/cases.ts) and the openssl vectors, run *inside* a runtime under
 * test: Bun, Deno or workerd. Only web platform APIs are used here (Request, Response, Headers,
 * ReadableStream, TextEncoder, crypto.subtle), so this module runs unchanged on workerd with no
 * Node built-ins. test/runtimes/runtimes.test.ts serializes the table in Node, hands it to the runtime,
 * and asserts on the answers that come back as JSON.
 *
 * Importing this module first also installs the HMAC probe below, so it must be evaluated before
 * flag-webhooks is loaded: the library picks its HMAC implementation once, at load.
 */

import type * as Core from "flag-webhooks";
import type * as Adapter from "flag-webhooks/fetch";
import type * as HonoAdapter from "flag-webhooks/hono";
import type { Hono } from "hono";

/** One delivery of the case table, as JSON: bytes as hex, signatures already computed. */
export interface WireCase {
  name: string;
  method: string;
  /** Header values; an array sends the header once per element. */
  headers: Record<string, string | string[]>;
  bodyHex: string;
  /** Send the body as a ReadableStream of 4 chunks, so the Request has no known length. */
  streamed: boolean;
}

/** One known-answer vector of test/fixtures/signatures.json. */
export interface WireVector {
  name: string;
  secret: string;
  signature: string;
  bodyHex: string;
  /** The body as text, when it is valid UTF-8: sign() must give the same signature for it. */
  text?: string;
}

export interface SuiteInput {
  secrets: string[];
  limit: number;
  cases: WireCase[];
  vectors: WireVector[];
  /**
   * Module URLs of the built core and fetch adapter, for runtimes that load dist directly, and of
   * the Hono middleware and Hono itself, for the runtimes the Hono table runs in.
   */
  modules?: { core: string; adapter: string; honoAdapter?: string; hono?: string };
}

/** What the runtime's fetch handler answered, or what it threw. */
export interface Answer {
  name: string;
  status: number;
  contentType: string | null;
  allow: string | null;
  body: string;
  thrown?: string;
}

export interface VectorResult {
  name: string;
  /** sign() over the body bytes. */
  signed: string;
  /** sign() over the body as a string, when the vector has one. */
  signedText: string | null;
  verified: boolean;
  /** verifySignature() with the last hex digit of the signature changed. */
  verifiedAltered: boolean;
  thrown?: string;
}

/** Which HMAC implementation the library reached for, observed from outside it. */
export interface HmacProbe {
  /** `typeof` of the globals the core's backend selection looks at. */
  globals: { process: string; getBuiltinModule: string; Buffer: string };
  /** Ids the library asked `process.getBuiltinModule` for, in order. */
  builtinsRequested: string[];
  /** Calls into crypto.subtle. */
  webCrypto: { importKey: number; sign: number; verify: number };
  /** Whether crypto.subtle's methods could be wrapped; if not, `webCrypto` counts nothing. */
  subtleWrapped: boolean;
}

export interface SuiteResult {
  /** navigator.userAgent, which names the runtime. */
  userAgent: string;
  hmac: HmacProbe;
  cases: Answer[];
  /** The first case sent again after every other one. */
  afterHostile: Answer;
  vectors: VectorResult[];
  /** The same cases through the Hono middleware in a Hono app, when the library includes it. */
  hono?: { cases: Answer[]; afterHostile: Answer };
}

export interface Library {
  core: typeof Core;
  adapter: typeof Adapter;
  /** The built Hono middleware and the `Hono` class, to run the table through a Hono app too. */
  hono?: { adapter: typeof HonoAdapter; Hono: typeof Hono };
}

const probe: HmacProbe = installProbe();

function installProbe(): HmacProbe {
  const scope = globalThis as { process?: { getBuiltinModule?: (id: string) => unknown }; Buffer?: unknown };
  const result: HmacProbe = {
    globals: {
      process: typeof scope.process,
      getBuiltinModule: typeof scope.process?.getBuiltinModule,
      Buffer: typeof scope.Buffer,
    },
    builtinsRequested: [],
    webCrypto: { importKey: 0, sign: 0, verify: 0 },
    subtleWrapped: false,
  };
  const proc = scope.process;
  const load = proc?.getBuiltinModule;
  if (proc && typeof load === "function") {
    proc.getBuiltinModule = (id: string) => {
      result.builtinsRequested.push(id);
      return load.call(proc, id);
    };
  }
  const subtle = globalThis.crypto.subtle as unknown as Record<string, (...args: unknown[]) => unknown>;
  let wrapped = true;
  for (const method of ["importKey", "sign", "verify"] as const) {
    const original = subtle[method];
    if (typeof original !== "function") continue;
    const counting = (...args: unknown[]) => {
      result.webCrypto[method]++;
      return original.apply(subtle, args);
    };
    subtle[method] = counting;
    wrapped &&= globalThis.crypto.subtle[method] === (counting as unknown);
  }
  result.subtleWrapped = wrapped;
  return result;
}

/** Runs every case through one `webhookHandler`, then every vector through the core. */
export async function runSuite(input: SuiteInput, lib: Library): Promise<SuiteResult> {
  const handler = lib.adapter.webhookHandler({
    secret: input.secrets,
    limit: input.limit,
    onEvent: (event) => Response.json({ received: event }),
  });
  const { cases, afterHostile } = await runCases(handler, input.cases);
  const vectors: VectorResult[] = [];
  for (const v of input.vectors) vectors.push(await checkVector(lib.core, v));
  const result: SuiteResult = { userAgent: navigator.userAgent, hmac: probe, cases, afterHostile, vectors };
  if (lib.hono) {
    const app = new lib.hono.Hono();
    const middleware = lib.hono.adapter.webhookMiddleware({ secret: input.secrets, limit: input.limit });
    app.all("/webhooks", middleware, (c) => c.json({ received: c.var.webhookEvent }));
    result.hono = await runCases(async (request) => app.fetch(request), input.cases);
  }
  return result;
}

async function runCases(handler: (request: Request) => Promise<Response>, table: WireCase[]) {
  const cases: Answer[] = [];
  for (const c of table) cases.push(await answer(handler, c));
  const first = table[0];
  if (!first) throw new Error("the case table is empty");
  return { cases, afterHostile: await answer(handler, first) };
}

function toRequest(c: WireCase): Request {
  const headers = new Headers();
  for (const [name, value] of Object.entries(c.headers)) {
    for (const v of Array.isArray(value) ? value : [value]) headers.append(name, v);
  }
  const url = "http://localhost/webhooks";
  if (c.method === "GET" || c.method === "HEAD") return new Request(url, { method: c.method, headers });
  const bytes = hexToBytes(c.bodyHex);
  const body = c.streamed
    ? new ReadableStream<Uint8Array>({
        start(controller) {
          const step = Math.ceil(bytes.length / 4);
          for (let i = 0; i < bytes.length; i += step) controller.enqueue(bytes.slice(i, i + step));
          controller.close();
        },
      })
    : bytes;
  return new Request(url, { method: c.method, headers, body, duplex: "half" } as RequestInit);
}

async function answer(handler: (request: Request) => Promise<Response>, c: WireCase): Promise<Answer> {
  try {
    const response = await handler(toRequest(c));
    return {
      name: c.name,
      status: response.status,
      contentType: response.headers.get("content-type"),
      allow: response.headers.get("allow"),
      body: await response.text(),
    };
  } catch (error) {
    return { name: c.name, status: 0, contentType: null, allow: null, body: "", thrown: explain(error) };
  }
}

async function checkVector(core: typeof Core, v: WireVector): Promise<VectorResult> {
  const payload = hexToBytes(v.bodyHex);
  try {
    const altered = v.signature.slice(0, -1) + (v.signature.endsWith("0") ? "1" : "0");
    return {
      name: v.name,
      signed: await core.sign({ secret: v.secret, payload }),
      signedText: v.text === undefined ? null : await core.sign({ secret: v.secret, payload: v.text }),
      verified: await core.verifySignature({ secret: v.secret, payload, signature: v.signature }),
      verifiedAltered: await core.verifySignature({ secret: v.secret, payload, signature: altered }),
    };
  } catch (error) {
    return {
      name: v.name,
      signed: "",
      signedText: null,
      verified: false,
      verifiedAltered: false,
      thrown: explain(error),
    };
  }
}

function hexToBytes(hex: string): Uint8Array<ArrayBuffer> {
  const bytes = new Uint8Array(hex.length / 2);
  for (let i = 0; i < bytes.length; i++) bytes[i] = Number.parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  return bytes;
}

function explain(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}\n${error.stack ?? ""}` : String(error);
}
