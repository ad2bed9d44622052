/**
 * A raw request body exactly as received: a string (meaning its UTF-8 bytes), a `Uint8Array`
 * (Node's `Buffer` is one), an `ArrayBuffer`, or any other `ArrayBufferView`.
 */
export type Payload = string | Uint8Array | ArrayBuffer | ArrayBufferView;

/** Bytes of a non-string payload, without copying. Assumes {@link assertPayload} passed. */
export function bytesOf(payload: Exclude<Payload, string>): Uint8Array {
  if (payload instanceof Uint8Array) return payload;
  if (ArrayBuffer.isView(payload)) return new Uint8Array(payload.buffer, payload.byteOffset, payload.byteLength);
  return new Uint8Array(payload);
}

export function assertPayload(payload: unknown): asserts payload is Payload {
  // A Uint8Array (Node's Buffer included) is an ArrayBuffer view.
  if (typeof payload === "string" || ArrayBuffer.isView(payload) || payload instanceof ArrayBuffer) return;
  // The common mistake is passing the object a JSON body parser made: the signature covers the
  // bytes on the wire, which re-serialising cannot reproduce. Say what to pass instead.
  throw new TypeError(
    `flag-webhooks: option "payload" must be the raw body as a string or bytes, got ${describe(payload)}. ${
      payload === undefined ? UNDEFINED_HINT : PARSED_HINT
    }`,
  );
}

const PARSED_HINT =
  "A body parser already turned the body into an object, and a signature over the bytes on the wire " +
  "cannot be checked against a re-serialised object. Pass the raw bytes instead: in Express, use " +
  'flag-webhooks/express or express.raw({ type: "*/*" }) on the webhook route (or keep req.rawBody ' +
  "with express.json({ verify: keepRawBody })); in Koa, mount flag-webhooks/koa before the body parser; " +
  "in fetch handlers (Next.js, Hono, Workers), await request.text() or request.arrayBuffer() instead of " +
  "request.json(); in NestJS, pass req.rawBody with NestFactory.create(AppModule, { rawBody: true }); in " +
  "Fastify, register flag-webhooks/fastify.";

const UNDEFINED_HINT =
  "No raw body was kept: in NestJS, create the app with NestFactory.create(AppModule, { rawBody: true }) " +
  'and pass req.rawBody; in Express, use express.raw({ type: "*/*" }) or ' +
  "express.json({ verify: keepRawBody }) from flag-webhooks/express.";

function describe(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  return typeof value === "object" ? "a parsed object" : typeof value;
}

/** The chunks of a body read from a stream, as one Uint8Array (without a copy when there is one chunk). */
export function joinChunks(chunks: Uint8Array[], length: number): Uint8Array {
  if (chunks.length === 1) return chunks[0] as Uint8Array;
  const body = new Uint8Array(length);
  let offset = 0;
  for (const chunk of chunks) {
    body.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return body;
}
