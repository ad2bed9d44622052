// A flag's positions past what one DynamoDB item holds (400 KB): a flag with many fields (per-user
// targets, many rules) grows its record with every new path. The record is read and written whole
// (the rule decides an event over every field of its flag), so rather than shard it by field it is
// cut, as bytes, into parts kept in items of their own, written before the flag's item under keys
// no earlier commit used (the hold's token), so a commit that then fails its condition (its hold
// ran out) changes nothing any reader sees; the flag's item names the parts it uses, and the parts
// it no longer names are deleted after the commit (else DynamoDB's TTL deletes them). A flag whose
// record fits in its item (nearly all) costs no request more.
import {
  type AttributeValue,
  BatchGetItemCommand,
  type BatchGetItemCommandOutput,
  BatchWriteItemCommand,
  type BatchWriteItemCommandOutput,
  type DynamoDBClient,
  type WriteRequest,
} from "@aws-sdk/client-dynamodb";
import { bounded } from "../dynamodb-requests.js";

/**
 * The most bytes of positions kept in the flag's own item, and in each part: under DynamoDB's
 * 400 KB item, leaving room for the key, the hold and the attributes' names.
 */
export const PART_BYTES = 350_000;
/** Items a BatchWriteItem takes at most (DynamoDB's limit); a BatchGetItem takes 100. */
const WRITE_BATCH = 25;
/** Tries of a batch's unprocessed items (throttled) before the request is failed. */
const BATCH_TRIES = 5;

const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));

/** Where a flag's positions are, as its item says: in it (`text`), or in `count` parts written by `by`. */
export type Stored = { text: string | undefined } | { by: string; count: number };

/** The stored positions of a flag's item, as {@link Stored}. */
export function storedIn(item: Record<string, AttributeValue> | undefined): Stored {
  const by = item?.partsBy?.S;
  const count = Number(item?.parts?.N);
  if (by !== undefined && Number.isSafeInteger(count) && count > 0) return { by, count };
  return { text: item?.positions?.S };
}

/** The key of part `i` of the positions written by the hold `by`, for the flag item `pk`. */
const partKey = (pk: string, by: string, i: number) => ({ pk: { S: `${pk}#part:${by}:${i}` } });

/** The item attributes that keep `text` in the flag's item, or name its parts, and the parts to write first. */
export function cut(by: string, text: string): { attributes: Record<string, AttributeValue>; parts: Uint8Array[] } {
  // At most 3 bytes of UTF-8 per UTF-16 unit: most records are known to fit without encoding them.
  if (text.length * 3 <= PART_BYTES) return { attributes: { positions: { S: text } }, parts: [] };
  const bytes = new TextEncoder().encode(text);
  if (bytes.length <= PART_BYTES) return { attributes: { positions: { S: text } }, parts: [] };
  const parts: Uint8Array[] = [];
  for (let at = 0; at < bytes.length; at += PART_BYTES) parts.push(bytes.subarray(at, at + PART_BYTES));
  return { attributes: { partsBy: { S: by }, parts: { N: String(parts.length) } }, parts };
}

/** Reads the parts `stored` names and joins them into the positions' text. */
export async function readParts(
  client: DynamoDBClient,
  table: string,
  pk: string,
  stored: { by: string; count: number },
  timeout: number,
): Promise<string> {
  const found = new Map<string, Uint8Array>();
  const keys = Array.from({ length: stored.count }, (_, i) => partKey(pk, stored.by, i));
  for (let at = 0; at < keys.length; at += 100) {
    let pending: Record<string, AttributeValue>[] | undefined = keys.slice(at, at + 100);
    for (let tries = 0; pending?.length; tries++) {
      if (tries === BATCH_TRIES) throw new Error("flag-webhooks: DynamoDB did not return a flag's positions");
      if (tries > 0) await sleep(25 * 2 ** tries);
      const { Responses, UnprocessedKeys }: BatchGetItemCommandOutput = await client.send(
        new BatchGetItemCommand({ RequestItems: { [table]: { Keys: pending, ConsistentRead: true } } }),
        bounded(timeout),
      );
      for (const item of Responses?.[table] ?? []) {
        if (item.pk?.S && item.part?.B) found.set(item.pk.S, item.part.B);
      }
      pending = UnprocessedKeys?.[table]?.Keys;
    }
  }
  const chunks = keys.map((key) => found.get(key.pk.S));
  // A part TTL deleted under a flag item still live (their expiries are written together): lost.
  if (chunks.some((chunk) => chunk === undefined))
    throw new Error("flag-webhooks: a part of a flag's positions is gone");
  const bytes = new Uint8Array(chunks.reduce((sum, chunk) => sum + (chunk?.length ?? 0), 0));
  let at = 0;
  for (const chunk of chunks as Uint8Array[]) {
    bytes.set(chunk, at);
    at += chunk.length;
  }
  return new TextDecoder().decode(bytes);
}

/** Writes `parts` (by the hold `by`) with the flag item's expiry, or deletes the parts `stored` names. */
export async function writeParts(
  client: DynamoDBClient,
  table: string,
  pk: string,
  change: { by: string; parts: Uint8Array[]; expiry: Record<string, AttributeValue> } | { delete: Stored },
  timeout: number,
): Promise<void> {
  let requests: WriteRequest[];
  if ("delete" in change) {
    const { delete: stored } = change;
    if (!("by" in stored)) return;
    requests = Array.from({ length: stored.count }, (_, i) => ({
      DeleteRequest: { Key: partKey(pk, stored.by, i) },
    }));
  } else {
    requests = change.parts.map((part, i) => ({
      PutRequest: { Item: { ...partKey(pk, change.by, i), part: { B: part }, ...change.expiry } },
    }));
  }
  for (let at = 0; at < requests.length; at += WRITE_BATCH) {
    let pending: WriteRequest[] | undefined = requests.slice(at, at + WRITE_BATCH);
    for (let tries = 0; pending?.length; tries++) {
      if (tries === BATCH_TRIES) throw new Error("flag-webhooks: DynamoDB did not take a flag's positions");
      if (tries > 0) await sleep(25 * 2 ** tries);
      const { UnprocessedItems }: BatchWriteItemCommandOutput = await client.send(
        new BatchWriteItemCommand({ RequestItems: { [table]: pending } }),
        bounded(timeout),
      );
      pending = UnprocessedItems?.[table];
    }
  }
}
