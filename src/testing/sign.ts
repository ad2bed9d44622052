// The one way the test kit turns its options into signed bytes and headers, for every shape of
// delivery it makes (a string for supertest, a Request, a Lambda event).
import { SIGNATURE_HEADER, sign } from "../signature.js";
import type { DeliveryOptions, SignedDelivery } from "./index.js";

/** The exact payload the options describe: the event as JSON, or the body as it is. */
export function payloadOf(options: DeliveryOptions): string | Uint8Array {
  if (typeof options !== "object" || options === null) {
    throw new TypeError('flag-webhooks/testing: options with a "secret" and an "event" or a "body" are required');
  }
  const { event, body } = options;
  if ((event === undefined) === (body === undefined)) {
    throw new TypeError('flag-webhooks/testing: pass exactly one of "event" and "body"');
  }
  if (event !== undefined) return JSON.stringify(event);
  if (typeof body !== "string" && !(body instanceof Uint8Array)) {
    throw new TypeError('flag-webhooks/testing: option "body" must be a string or a Uint8Array');
  }
  return body;
}

/** The headers the service sends with `payload`: its content type and its signature. */
export async function headersFor(secret: string, payload: string | Uint8Array): Promise<SignedDelivery["headers"]> {
  return { "content-type": "application/json", [SIGNATURE_HEADER]: await sign({ secret, payload }) };
}
