import { type FlagUpdatedEvent, SIGNATURE_HEADER, sign } from "flag-webhooks";
import { createEvent, type EventOverrides, type SignedDelivery, signedDelivery } from "flag-webhooks/testing";

// Signed deliveries for the tests, built on what the package ships for its users
// (flag-webhooks/testing, and `sign` from the core): a test signs as a user's test would, and no
// test computes an HMAC of its own (the signature and openssl-vector tests of test/core aside).

/**
 * A fresh `flag.updated` delivery signed with `secret`, as the service sends it: the exact JSON
 * body and its headers. Each call has a new event id, so dedupe cases never meet another test's
 * id; `overrides` change any part of the event (`createdAt`, `id`, `data`...).
 */
export function delivery(
  secret: string,
  overrides?: EventOverrides<Omit<FlagUpdatedEvent, "type">>,
): Promise<SignedDelivery> {
  return signedDelivery({ secret, event: createEvent("flag.updated", overrides) });
}

/** The JSON of a fresh `flag.updated` event with the id given (and any other part overridden). */
export function eventJson(id: string, overrides?: EventOverrides<Omit<FlagUpdatedEvent, "type" | "id">>): string {
  return JSON.stringify(createEvent("flag.updated", { ...overrides, id }));
}

/** The Service-Signature of `body` (its UTF-8 bytes, or the bytes themselves) under `secret`. */
export function signatureOf(secret: string, body: string | Uint8Array): Promise<string> {
  return sign({ secret, payload: body });
}

/** The headers the service sends with `body` signed under `secret`. */
export async function signedHeaders(
  secret: string,
  body: string | Uint8Array,
): Promise<{ "content-type": "application/json"; "service-signature": string }> {
  return { "content-type": "application/json", [SIGNATURE_HEADER]: await signatureOf(secret, body) };
}

/** The status a direct call of an `onEvent` answers: its reply's (204 for none), or its error's. */
export async function statusOf(answer: Promise<unknown>): Promise<number> {
  try {
    const reply = (await answer) as { status?: number } | undefined;
    return reply?.status ?? 204;
  } catch (error) {
    return (error as { status?: number }).status ?? 500;
  }
}
