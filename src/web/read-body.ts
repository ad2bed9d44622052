import { bodyAlreadyParsed, payloadTooLarge } from "../errors.js";
import { joinChunks } from "../payload.js";

/**
 * Reads a fetch Request's raw body, at most `limit` bytes. Refuses at once when Content-Length
 * announces more; otherwise counts what the stream yields and cancels it at the first byte over
 * the limit, so a body without Content-Length (streamed) is never buffered past the limit. A body
 * already read is `body_already_parsed`, with the adapter's own `fix` in the message.
 */
export async function readRequestBody(request: Request, limit: number, fix: string): Promise<Uint8Array> {
  if (request.bodyUsed) throw bodyAlreadyParsed("the request body", fix);
  // An absent Content-Length is Number(null), 0, which is never over the limit.
  if (Number(request.headers.get("content-length")) > limit) throw payloadTooLarge(limit);
  if (request.body === null) return new Uint8Array(0);

  const reader = request.body.getReader();
  const chunks: Uint8Array[] = [];
  let received = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    received += value.byteLength;
    if (received > limit) {
      // Not awaited: some runtimes settle cancel() only when the sender stops.
      reader.cancel().catch(() => {});
      throw payloadTooLarge(limit);
    }
    chunks.push(value);
  }
  return joinChunks(chunks, received);
}
