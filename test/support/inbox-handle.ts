import { randomUUID } from "node:crypto";
import type { WebhookEvent } from "flag-webhooks";
import { expect } from "vitest";

// The check every client of a transactional inbox (Postgres, SQLite) passes through handle(), so
// that "handled once" is asked of each driver, ORM and database in the same words.

/**
 * Runs an inbox's `onEvent` (its handle() around a handler that writes one effect through tx, and
 * throws "fails once" on the first run of an id given to `failing`): a delivery and its duplicate
 * leave one effect, the duplicate answered 204 webhook-duplicate; a run that throws leaves none,
 * and its retry one. `effects` counts an id's effects in the database.
 */
export async function expectExactlyOnce(
  onEvent: (event: WebhookEvent) => Promise<unknown>,
  failing: (id: string) => void,
  effects: (id: string) => Promise<number> | number,
): Promise<void> {
  const id = `evt_${randomUUID()}`;
  const event = { id, type: "flag.updated" } as WebhookEvent;
  expect(await onEvent(event)).toBeUndefined();
  expect(await onEvent(event)).toEqual({ status: 204, headers: { "webhook-duplicate": "true" } });
  expect(await effects(id)).toBe(1);
  const bad = `evt_${randomUUID()}`;
  failing(bad);
  await expect(onEvent({ id: bad, type: "flag.updated" } as WebhookEvent)).rejects.toThrow("fails once");
  expect(await effects(bad)).toBe(0);
  expect(await onEvent({ id: bad, type: "flag.updated" } as WebhookEvent)).toBeUndefined();
  expect(await effects(bad)).toBe(1);
}
