// The one way the test kit turns its options into signed bytes and headers, for every shape of
// delivery it makes (a string for supertest, a Request, a Lambda event).
import { SIGNATURE_HEADER, sign } from "../signature.js";

/** Options of {@link signedDelivery} and {@link signedRequest}: a secret and either an event or a body. */
export type DeliveryOptions =
  | {
      /** The endpoint secret the receiver under test is configured with. */
      secret: string;
      /** An event to send, usually from {@link createEvent}; it is sent as `JSON.stringify(event)`. */
      event: object;
      body?: undefined;
    }
  | {
      secret: string;
      /** The exact body to send, e.g. a pretty-printed or deliberately invalid one. */
      body: string | Uint8Array;
      event?: undefined;
    };

/** A signed delivery for an HTTP client such as supertest: send `body` as it is, with `headers`. */
export interface SignedDelivery {
  /** The exact body that was signed, as a string so that HTTP clients send it unchanged. */
  body: string;
  /** `content-type: application/json` and the `service-signature` of `body`. */
  headers: { "content-type": "application/json"; "service-signature": string };
}

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
