import { createServer, type ServerResponse } from "node:http";
import { webhookMiddleware } from "flag-webhooks/express";
import { describe, expect, it } from "vitest";
import { delivery } from "../support/deliveries.js";
import { GatedStore } from "../support/gated-store.js";
import { exchange, rawDelivery, serverPerTest } from "../support/http.js";

// A held 2xx (node/watch-answer.ts) reaches Node only once the store has recorded the event, so
// what Node would refuse at once (a chunk it cannot send, a reason HTTP cannot carry, a write or
// an end after end) is refused where it is called, as Node refuses it (node/refusals.ts). Each
// route runs twice on node:http with the Express middleware: without a store (Node's own response)
// and with a store that records only after the route has made its calls (the answer held
// meanwhile). The bytes that leave and what the route saw must match, and the held answer must
// leave only once recorded. What the route saw is compared in any order: Node's refusals come on
// the next tick, the held answer's in a microtask, and Node itself orders a write's callback and
// its "error" differently from an end's.

const SECRET = "refusals-secret";
const serve = serverPerTest();

interface Route {
  name: string;
  route(res: ServerResponse, seen: string[]): void;
  /** What the route sees on Node's own response, in any order. */
  seen: string[];
}

/** The code and message of what `call` throws (Node's value it received left out), or what it returns. */
function outcome(call: () => unknown): string {
  try {
    return `returned ${String(call())}`;
  } catch (error) {
    const { code, message } = error as NodeJS.ErrnoException;
    return `threw ${code}: ${message.split(". Received")[0]}`;
  }
}

/** Chunks Node's write refuses: not a string nor a Uint8Array (null with a code of its own). */
const notChunks: unknown[] = [5, {}, true, () => {}, null, undefined];
const notAChunk =
  'threw ERR_INVALID_ARG_TYPE: The "chunk" argument must be of type string or an instance of Buffer or Uint8Array';
const refusedChunks = [
  notAChunk,
  notAChunk,
  notAChunk,
  notAChunk,
  "threw ERR_STREAM_NULL_VALUES: May not write null values to stream",
  notAChunk,
];
const badReason = "threw ERR_INVALID_CHAR: Invalid character in statusMessage";
const write = (res: ServerResponse, ...args: unknown[]) => (res.write as (...args: unknown[]) => boolean)(...args);
const end = (res: ServerResponse, ...args: unknown[]) => (res.end as (...args: unknown[]) => ServerResponse)(...args);

const routes: Route[] = [
  {
    name: "a write of what is no chunk, before any head: it throws at once and holds nothing, and a head written after it leaves",
    route(res, seen) {
      res.statusCode = 200;
      for (const chunk of notChunks) seen.push(outcome(() => write(res, chunk)));
      res.writeHead(201, { "content-type": "text/plain" });
      res.end("ok");
    },
    seen: refusedChunks,
  },
  {
    name: "a write of what is no chunk, after a head: it throws at once, and the body leaves whole",
    route(res, seen) {
      res.writeHead(200, { "content-type": "text/plain" });
      res.write("o");
      for (const chunk of notChunks) seen.push(outcome(() => write(res, chunk)));
      res.end("k");
    },
    seen: refusedChunks,
  },
  {
    name: "end(callback) after a write: the callback is no chunk, and comes once the answer is sent",
    route(res, seen) {
      res.writeHead(200, { "content-type": "text/plain" });
      res.write("ok");
      res.end(() => seen.push("ended"));
    },
    seen: ["ended"],
  },
  {
    name: "end(callback) with nothing written: a 200 with no body, the callback once it is sent",
    route(res, seen) {
      res.statusCode = 200;
      res.end(() => seen.push("ended"));
    },
    seen: ["ended"],
  },
  {
    name: "an end() with what is no chunk (a number, an object), before and after a head: it throws at once, and a later end() leaves",
    route(res, seen) {
      res.statusCode = 200;
      seen.push(outcome(() => end(res, 5)));
      res.writeHead(200, { "content-type": "text/plain" });
      res.write("o");
      seen.push(outcome(() => end(res, {})));
      res.end("k");
    },
    seen: [notAChunk, notAChunk],
  },
  ...["200", 200.5].map(
    (status): Route => ({
      name: `a head whose status is no integer but reads as one to Node (${JSON.stringify(status)}): held as the 2xx it is, its status read back as Node's number`,
      route(res, seen) {
        res.writeHead(status as number, { "content-type": "text/plain" });
        seen.push(`status ${res.statusCode} ${typeof res.statusCode}`);
        res.end("ok");
      },
      seen: ["status 200 number"],
    }),
  ),
  {
    name: 'a head whose status Node refuses ("abc", 99): it throws at once, and a good head after it leaves',
    route(res, seen) {
      for (const status of ["abc", 99]) seen.push(outcome(() => res.writeHead(status as number)));
      res.writeHead(200, { "content-type": "text/plain" });
      res.end("ok");
    },
    seen: [
      "threw ERR_HTTP_INVALID_STATUS_CODE: Invalid status code: abc",
      "threw ERR_HTTP_INVALID_STATUS_CODE: Invalid status code: 99",
    ],
  },
  {
    name: "writes after an end() that began the answer (no head before it): refused as after any end",
    route(res, seen) {
      res.on("error", (error: NodeJS.ErrnoException) => seen.push(`error ${error.code}`));
      res.statusCode = 200;
      res.end("ok");
      seen.push(outcome(() => res.write("a")));
      seen.push(outcome(() => res.end("b") === res));
    },
    seen: ["returned false", "returned true", "error ERR_STREAM_WRITE_AFTER_END", "error ERR_STREAM_WRITE_AFTER_END"],
  },
  {
    name: "a second head after a non-2xx one was written: Node's refusal, and the first head stands",
    route(res, seen) {
      res.writeHead(404, { "content-type": "text/plain" });
      seen.push(outcome(() => res.writeHead(200)));
      res.end("no");
    },
    seen: ["threw ERR_HTTP_HEADERS_SENT: Cannot write headers after they are sent to the client"],
  },
  {
    name: "end(false), a falsy chunk Node writes nothing for",
    route(res, seen) {
      res.writeHead(200, { "content-type": "text/plain" });
      res.write("ok");
      seen.push(outcome(() => end(res, false).writableEnded));
    },
    seen: ["returned true"],
  },
  {
    name: "writes and ends after end: false, the error to the callback and to the error listeners, never in the body",
    route(res, seen) {
      res.on("error", (error: NodeJS.ErrnoException) => seen.push(`error ${error.code}: ${error.message}`));
      res.writeHead(200, { "content-type": "text/plain" });
      res.end("ok");
      seen.push(outcome(() => res.write("a")));
      // An encoding is no callback.
      seen.push(outcome(() => res.write("b", "utf8")));
      seen.push(outcome(() => res.write("c", (error) => seen.push(`write callback ${error?.message}`))));
      seen.push(outcome(() => res.end("d") === res));
      seen.push(outcome(() => res.end("e", "utf8", () => seen.push("end callback")) === res));
      seen.push(outcome(() => res.end() === res));
      // A chunk Node refuses throws before the end is looked at; a falsy one writes nothing, so no error.
      seen.push(outcome(() => write(res, 5)));
      seen.push(outcome(() => end(res, false) === res));
    },
    seen: [
      "returned false",
      "returned false",
      "returned false",
      "returned true",
      "returned true",
      "returned true",
      notAChunk,
      "returned true",
      ...Array(5).fill("error ERR_STREAM_WRITE_AFTER_END: write after end"),
      "write callback write after end",
      "end callback",
    ],
  },
  {
    name: "a reason HTTP can carry (a tab, a space, ~, bytes 0x80 and 0xff) after the ones Node refuses (0x7f, 0x00, U+0100)",
    route(res, seen) {
      for (const reason of ["a\x7f", "\x00", "b\u0100", "A\t ~\x80\xff"]) {
        seen.push(outcome(() => res.writeHead(200, reason, { "content-type": "text/plain" }).statusCode));
      }
      res.end("ok");
    },
    seen: [...Array(3).fill(badReason), "returned 200"],
  },
  {
    name: "a statusMessage Node refuses (a string, or no string whose text it refuses), then a head with no reason, or end()",
    route(res, seen) {
      for (const reason of ["a\n", ["b\x7f"]]) {
        res.statusMessage = reason as string;
        seen.push(outcome(() => res.writeHead(200, { "content-type": "text/plain" }).statusCode));
        seen.push(outcome(() => res.end("no")));
      }
      res.statusMessage = "Fine";
      res.end("ok");
    },
    seen: Array(4).fill(badReason),
  },
];

/** The wire and what the route saw, without a store or with one that records once the route is done. */
async function run(entry: Route, held: boolean) {
  const store = held ? new GatedStore() : undefined;
  const seen: string[] = [];
  let recordedAtFinish: boolean | undefined;
  const middleware = webhookMiddleware({ secret: SECRET, ...(store ? { dedupe: { store, ttl: 60_000 } } : {}) });
  const server = await serve(
    createServer((req, res) => {
      void middleware(req, res, () => {
        res.once("finish", () => {
          recordedAtFinish = store?.recorded;
        });
        entry.route(res, seen);
        // Recorded only after the route's calls and what they queued: until then its answer is held.
        setImmediate(() => store?.open());
      });
    }),
  );
  const wire = await exchange(server, rawDelivery(await delivery(SECRET), "connection: close\r\n"));
  return { wire: wire.replace(/^date: .*\r\n/gim, ""), seen: [...seen].sort(), recordedAtFinish };
}

describe("a held 2xx refuses what Node's own response refuses, where Node would", () => {
  it.each(routes)("$name", async (entry) => {
    const plain = await run(entry, false);
    const held = await run(entry, true);
    expect(plain.wire).toMatch(/^HTTP\/1\.1 (20[01]|404) /);
    expect(plain.seen).toEqual([...entry.seen].sort());
    // A 2xx held until recorded; a 404 is no handled event, never recorded.
    expect(held.recordedAtFinish).toBe(plain.wire.startsWith("HTTP/1.1 20"));
    expect({ wire: held.wire, seen: held.seen }).toEqual({ wire: plain.wire, seen: plain.seen });
  });
});
