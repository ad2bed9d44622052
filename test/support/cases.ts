import { sign } from "flag-webhooks";
import { vector } from "./vectors.js";

/**
 * One table of deliveries and the answer every adapter must give them: the same request gets the
 * same status and error code from Express, Koa, Fastify, Hono, plain node:http, fetch and Lambda.
 * Bodies are raw bytes with signatures from the openssl vectors or computed (by the package's
 * `sign`) over those exact bytes; nothing is re-serialised.
 */
export interface DeliveryCase {
  name: string;
  method?: string;
  /** Header values; an array sends the header once per element. */
  headers: Record<string, string | string[]>;
  body: Buffer;
  /** Send the body in these many chunks with no Content-Length (chunked transfer encoding). */
  streamed?: boolean;
  status: number;
  /** The error code expected, or for a success the event type the application saw. */
  code?: string;
  eventType?: string;
}

export const LIMIT = 1024;
const compact = vector("flag-updated-compact");
const pretty = vector("flag-updated-pretty");
/** Adapters under test take a rotation list; the vectors' secret is the old one. */
export const SECRETS = ["rotated-new-secret", compact.secret];
export const SECRET = compact.secret;

const headers = (signature: string, extra: Record<string, string> = {}) => ({
  "content-type": "application/json",
  "service-signature": signature,
  ...extra,
});

/** The table, its signatures computed under {@link SECRET}. */
export async function buildCases(): Promise<DeliveryCase[]> {
  const signed = async (body: Buffer) => headers(await sign({ secret: SECRET, payload: body }));
  const withType = (type: string) => {
    const event = JSON.parse(compact.body.toString());
    event.type = type;
    return Buffer.from(JSON.stringify(event));
  };
  // A valid event padded with JSON whitespace to exactly LIMIT bytes, and one byte more.
  const atLimit = Buffer.concat([compact.body, Buffer.alloc(LIMIT - compact.body.length, " ")]);
  const overLimit = Buffer.concat([atLimit, Buffer.from(" ")]);
  const unknown = withType("flag.archived");
  const notAnEvent = vector("unicode-raw");
  const badUtf8 = vector("invalid-utf8-bytes");

  return [
    {
      name: "accepts the compact flag.updated vector",
      headers: headers(compact.signature),
      body: compact.body,
      status: 200,
      eventType: "flag.updated",
    },
    {
      name: "accepts the pretty-printed vector",
      headers: headers(pretty.signature),
      body: pretty.body,
      status: 200,
      eventType: "flag.updated",
    },
    {
      name: "accepts a body sent as text/plain",
      headers: headers(compact.signature, { "content-type": "text/plain" }),
      body: compact.body,
      status: 200,
      eventType: "flag.updated",
    },
    {
      name: "accepts a body sent as application/octet-stream",
      headers: headers(compact.signature, { "content-type": "application/octet-stream" }),
      body: compact.body,
      status: 200,
      eventType: "flag.updated",
    },
    {
      name: "accepts a body sent with no content-type",
      headers: { "service-signature": compact.signature },
      body: compact.body,
      status: 200,
      eventType: "flag.updated",
    },
    {
      name: "accepts a header name in any case",
      headers: { "SERVICE-SIGNATURE": compact.signature },
      body: compact.body,
      status: 200,
      eventType: "flag.updated",
    },
    {
      name: "accepts a streamed (chunked) body under the limit",
      headers: headers(compact.signature),
      body: compact.body,
      streamed: true,
      status: 200,
      eventType: "flag.updated",
    },
    {
      name: "accepts a body of exactly the limit",
      headers: await signed(atLimit),
      body: atLimit,
      status: 200,
      eventType: "flag.updated",
    },
    {
      name: "delivers an unknown event type as 'unknown'",
      headers: await signed(unknown),
      body: unknown,
      status: 200,
      eventType: "unknown",
    },
    {
      name: "refuses a delivery with no signature header",
      headers: { "content-type": "application/json" },
      body: compact.body,
      status: 401,
      code: "missing_signature",
    },
    {
      name: "refuses an empty signature header",
      headers: headers(""),
      body: compact.body,
      status: 401,
      code: "missing_signature",
    },
    {
      name: "refuses an uppercase signature",
      headers: headers(compact.signature.toUpperCase()),
      body: compact.body,
      status: 401,
      code: "invalid_signature",
    },
    {
      name: "refuses a sha256= prefixed signature",
      headers: headers(`sha256=${compact.signature}`),
      body: compact.body,
      status: 401,
      code: "invalid_signature",
    },
    {
      name: "refuses a truncated signature",
      headers: headers(compact.signature.slice(0, 63)),
      body: compact.body,
      status: 401,
      code: "invalid_signature",
    },
    {
      name: "refuses a tampered body",
      headers: headers(compact.signature),
      body: Buffer.from(compact.body.toString().replace("true", "fals")),
      status: 401,
      code: "invalid_signature",
    },
    {
      name: "refuses a repeated signature header even when both copies are right",
      headers: { "service-signature": [compact.signature, compact.signature] },
      body: compact.body,
      status: 401,
      code: "invalid_signature",
    },
    {
      name: "refuses a forged body that is not JSON as invalid_signature, unparsed",
      headers: headers(compact.signature),
      body: Buffer.from("not json"),
      status: 401,
      code: "invalid_signature",
    },
    {
      name: "refuses a body one byte over the limit",
      headers: await signed(overLimit),
      body: overLimit,
      status: 413,
      code: "payload_too_large",
    },
    {
      name: "refuses a streamed body over the limit, with no Content-Length",
      headers: await signed(overLimit),
      body: Buffer.concat([overLimit, overLimit]),
      streamed: true,
      status: 413,
      code: "payload_too_large",
    },
    {
      name: "refuses an authentic body that is not an event",
      headers: headers(notAnEvent.signature),
      body: notAnEvent.body,
      status: 400,
      code: "invalid_payload",
    },
    {
      name: "refuses an authentic body that is not UTF-8",
      headers: headers(badUtf8.signature),
      body: badUtf8.body,
      status: 400,
      code: "invalid_payload",
    },
    {
      name: "refuses an unsigned body over the limit as missing_signature, without reading it",
      headers: { "content-type": "application/json" },
      body: overLimit,
      status: 401,
      code: "missing_signature",
    },
    {
      name: "refuses a signed POST with no body as invalid_signature",
      headers: headers(compact.signature),
      body: Buffer.alloc(0),
      status: 401,
      code: "invalid_signature",
    },
    {
      name: "refuses a GET with 405 and Allow: POST",
      method: "GET",
      headers: {},
      body: Buffer.alloc(0),
      status: 405,
      code: "method_not_allowed",
    },
    {
      name: "refuses a PUT of a signed delivery",
      method: "PUT",
      headers: headers(compact.signature),
      body: compact.body,
      status: 405,
      code: "method_not_allowed",
    },
  ];
}
