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
  if (
    typeof payload === "string" ||
    payload instanceof Uint8Array ||
    payload instanceof ArrayBuffer ||
    ArrayBuffer.isView(payload)
  ) {
    return;
  }
  // The common mistake is passing the object a JSON body parser made: the signature covers the
  // bytes on the wire, which re-serialising cannot reproduce.
  throw new TypeError(
    `flag-webhooks: option "payload" must be the raw body (string, Uint8Array or ArrayBuffer), got ${describe(payload)}; ` +
      "read the body before any JSON parser, e.g. with express.raw() or request.arrayBuffer()",
  );
}

function describe(value: unknown): string {
  if (value === null) return "null";
  if (typeof value === "object") return (value as object).constructor?.name ?? "object";
  return typeof value;
}
