// Ordered delivery's positions on DynamoDB: one item per flag, holding the flag's positions and
// the hold on it together, so that taking the hold and reading the positions is one conditional
// write, and writing the new positions and ending the hold is another. One item per flag rather
// than per field: the rule decides a whole event at once over every field of its flag (a
// flag.deleted resets them all), so the unit the hold protects is the flag.
import {
  type AttributeValue,
  type DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  UpdateItemCommand,
} from "@aws-sdk/client-dynamodb";
import type { FlagPositions } from "../../delivery/order/rule.js";
import { checkScope, claimToken, scopedKey } from "../../store-contract/keys.js";
import type { OrderHold, OrderStore } from "../../store-contract/order-store.js";
import { parseDuration, TIMER_MAX } from "../../util/duration.js";
import { bounded, isConditionFailure } from "../dynamodb-requests.js";
import { cut, readParts, type Stored, storedIn, writeParts } from "./dynamodb-parts.js";
import { type Attempt, Turns } from "./turns.js";

/** Options of {@link DynamoDBOrderStore}. */
export interface DynamoDBOrderStoreOptions {
  /** The table's name: the dedupe table (`dedupeTable`'s shape), shared or one of its own. */
  table: string;
  /** The endpoint this store orders for (1 to 100 of `A-Z a-z 0-9 . _ -`), required, as for DynamoDBDedupeStore. */
  scope: string;
  /** How long a flag's positions are kept after their last write, in ms (default 24 h), by DynamoDB's TTL. */
  retention?: number;
  /** How long one request may take, the SDK's retries included, in ms or as a duration (default 2 s). */
  timeout?: number | string;
}

/** What a hold read: the flag's positions, and where they were kept (parts to delete once replaced). */
type Read = { positions: FlagPositions | undefined; stored: Stored };

const NAMES = {
  "#holder": "holder",
  "#lease": "lease",
  "#leaseEnds": "leaseEnds",
  "#expiresAt": "expiresAt",
  "#expiresAtMs": "expiresAtMs",
};

/**
 * Positions on a DynamoDB table of the dedupe table's shape (`pk`, TTL on `expiresAt`), for
 * several instances (Lambda functions, containers) of one endpoint. An item per flag, key
 * `order:<scope>#<flag>` (which no dedupe key can be: a scope holds no `:`), holds the flag's
 * positions and the hold on it: a hold is one conditional `UpdateItem` (taken only when no live
 * hold is there) that returns the positions; the commit is one `PutItem` conditioned on the hold
 * still being this delivery's, which writes the new positions and ends the hold together. Two
 * requests per delivery. A delivery that finds its flag held waits for it (woken at once by a
 * hold that ends in this process; else it looks again after a pause that doubles up to 250 ms).
 * The handler's effects are not in DynamoDB: a process that dies after them and before the commit
 * leaves the event to run again on the sender's retry, and a hold whose lease ran out is taken
 * over (its late commit writes nothing): by an instance that has seen that same hold unchanged for
 * a whole lease on its own clock, so clock skew between instances does not shorten a lease. A
 * flag's positions past one item (400 KB) are kept in parts, items of their own that the flag's
 * item names (two requests more per such delivery). Positions expire `retention` after their last
 * write.
 *
 * @example
 * ```ts
 * import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
 * import { DynamoDBOrderStore } from "flag-webhooks/dynamodb";
 *
 * const store = new DynamoDBOrderStore(new DynamoDBClient({}), { table: process.env.DEDUPE_TABLE!, scope: "flag-mirror" });
 * export const handler = webhookHandler({ secret, maxAge: "5m", order: { store }, onEvent });
 * ```
 */
export class DynamoDBOrderStore implements OrderStore {
  readonly retention: number;
  readonly #client: DynamoDBClient;
  readonly #table: string;
  readonly #scope: string;
  readonly #timeout: number;
  readonly #turns = new Turns();
  readonly #watched = new Watched();

  constructor(client: DynamoDBClient, options: DynamoDBOrderStoreOptions) {
    if (typeof (client as { send?: unknown } | undefined)?.send !== "function") {
      throw new TypeError("flag-webhooks: DynamoDBOrderStore needs a DynamoDBClient from @aws-sdk/client-dynamodb");
    }
    const { table, scope, retention = 86_400_000, timeout } = options ?? ({} as DynamoDBOrderStoreOptions);
    if (typeof table !== "string" || table.length < 3) {
      throw new TypeError('flag-webhooks: DynamoDBOrderStore option "table" must be the name of a DynamoDB table');
    }
    if (!Number.isSafeInteger(retention) || retention < 1) {
      throw new TypeError('flag-webhooks: option "retention" must be a positive whole number of ms');
    }
    this.#client = client;
    this.#table = table;
    this.#scope = checkScope(scope, "DynamoDBOrderStore");
    this.retention = retention;
    this.#timeout = timeout === undefined ? 2000 : parseDuration(timeout, "timeout", TIMER_MAX);
  }

  async hold(flag: string, lease: number): Promise<OrderHold> {
    const pk = `order:${await scopedKey(this.#scope, flag)}`;
    const token = claimToken();
    const { positions, stored } = await this.#turns.take(flag, () => this.#attempt(pk, token, lease));
    let ended = false;
    const end = () => {
      ended = true;
      this.#turns.ended(flag);
    };
    return {
      positions,
      commit: async (next) => {
        if (ended) throw new Error("flag-webhooks: this hold has ended");
        try {
          await (next ? this.#write(pk, token, next, stored) : this.#unhold(pk, token));
        } catch (error) {
          if (isConditionFailure(error))
            throw new Error(`flag-webhooks: the hold on flag ${JSON.stringify(flag)} ran out`);
          // A write DynamoDB refused (an item past 400 KB, a throttle, no answer in time) left the
          // hold in place: end it, if still this one's, so the flag's next delivery need not wait
          // out the lease.
          await this.#unhold(pk, token).catch(() => undefined);
          throw error;
        } finally {
          end();
        }
      },
      release: async () => {
        if (ended) return;
        await this.#unhold(pk, token).catch(() => undefined);
        end();
      },
    };
  }

  /**
   * Takes the hold if none is there, or if the one there is the hold this instance has seen
   * unchanged for a whole lease on its own clock, and reads the positions with it.
   */
  async #attempt(pk: string, token: string, lease: number): Promise<Attempt<Read>> {
    const now = Date.now();
    const stale = this.#watched.lapsed(pk, now);
    try {
      const { Attributes } = await this.#client.send(
        new UpdateItemCommand({
          TableName: this.#table,
          Key: { pk: { S: pk } },
          // A new item (no positions yet) expires with the lease, so a hold alone is not kept.
          // `leaseEnds` is the holder's clock: kept for a person reading the item, never compared.
          UpdateExpression:
            "SET #holder = :token, #lease = :lease, #leaseEnds = :leaseEnds, #expiresAt = if_not_exists(#expiresAt, :seconds), #expiresAtMs = if_not_exists(#expiresAtMs, :leaseEnds)",
          ConditionExpression:
            stale === undefined ? "attribute_not_exists(#holder)" : "attribute_not_exists(#holder) OR #holder = :stale",
          ExpressionAttributeNames: NAMES,
          ExpressionAttributeValues: {
            ":token": { S: token },
            ":lease": { N: String(lease) },
            ":leaseEnds": { N: String(now + lease) },
            ":seconds": { N: String(Math.ceil((now + lease) / 1000)) },
            ...(stale !== undefined && { ":stale": { S: stale } }),
          },
          ReturnValues: "ALL_NEW",
          ReturnValuesOnConditionCheckFailure: "ALL_OLD",
        }),
        bounded(this.#timeout),
      );
      this.#watched.forget(pk);
      // Positions past their expiry are absent, though DynamoDB's TTL has not deleted them yet.
      const stored = Number(Attributes?.expiresAtMs?.N) > now ? storedIn(Attributes) : { text: undefined };
      let text: string | undefined;
      try {
        text = "by" in stored ? await readParts(this.#client, this.#table, pk, stored, this.#timeout) : stored.text;
      } catch (error) {
        // The hold is taken and its positions unread: end it, so the flag's next delivery need not wait it out.
        await this.#unhold(pk, token).catch(() => undefined);
        throw error;
      }
      return { hold: { positions: text === undefined ? undefined : (JSON.parse(text) as FlagPositions), stored } };
    } catch (error) {
      if (!isConditionFailure<Record<string, AttributeValue>>(error)) throw error;
      // DynamoDB returns the item that failed the condition; an emulator without
      // ReturnValuesOnConditionCheckFailure (dynalite) does not, so it is read.
      const item = error.Item ?? (await this.#holderOf(pk));
      const holder = item?.holder?.S;
      // An item written before holds recorded their lease: this delivery's own lease stands in.
      const theirs = Number(item?.lease?.N);
      if (holder === undefined) return { left: undefined };
      return { left: this.#watched.see(pk, holder, Number.isFinite(theirs) ? theirs : lease, Date.now()) };
    }
  }

  /**
   * Writes the positions and ends the hold in one request, if the hold is still this one's, or the
   * item is gone (DynamoDB's TTL deleted expired positions under the hold: no one else took it).
   */
  async #write(pk: string, token: string, next: FlagPositions, before: Stored): Promise<void> {
    const expires = Date.now() + this.retention;
    const expiry = { expiresAt: { N: String(Math.ceil(expires / 1000)) }, expiresAtMs: { N: String(expires) } };
    const { attributes, parts } = cut(token, JSON.stringify(next));
    const written = { by: token, count: parts.length };
    if (parts.length > 0) await writeParts(this.#client, this.#table, pk, { by: token, parts, expiry }, this.#timeout);
    try {
      await this.#put(pk, token, { ...attributes, ...expiry });
    } catch (error) {
      // Parts no flag item names: deleted now rather than kept until their expiry.
      void writeParts(this.#client, this.#table, pk, { delete: written }, this.#timeout).catch(() => undefined);
      throw error;
    }
    // The parts the flag's item named before: no hold reads them any more.
    void writeParts(this.#client, this.#table, pk, { delete: before }, this.#timeout).catch(() => undefined);
  }

  /** Puts the flag's item (no hold on it), if the hold is still `token`'s or the item is gone. */
  async #put(pk: string, token: string, attributes: Record<string, AttributeValue>): Promise<void> {
    await this.#client.send(
      new PutItemCommand({
        TableName: this.#table,
        Item: { pk: { S: pk }, ...attributes },
        ConditionExpression: "attribute_not_exists(#pk) OR #holder = :token",
        ExpressionAttributeNames: { "#pk": "pk", "#holder": NAMES["#holder"] },
        ExpressionAttributeValues: { ":token": { S: token } },
      }),
      bounded(this.#timeout),
    );
  }

  /** Reads the hold on the flag's item `pk`. */
  async #holderOf(pk: string): Promise<Record<string, AttributeValue> | undefined> {
    const { Item } = await this.#client.send(
      new GetItemCommand({
        TableName: this.#table,
        Key: { pk: { S: pk } },
        ConsistentRead: true,
        ProjectionExpression: "#holder, #lease",
        ExpressionAttributeNames: { "#holder": NAMES["#holder"], "#lease": NAMES["#lease"] },
      }),
      bounded(this.#timeout),
    );
    return Item;
  }

  /** Ends the hold, writing nothing, if it is still this one's. */
  async #unhold(pk: string, token: string): Promise<void> {
    await this.#client.send(
      new UpdateItemCommand({
        TableName: this.#table,
        Key: { pk: { S: pk } },
        UpdateExpression: "REMOVE #holder, #lease, #leaseEnds",
        ConditionExpression: "#holder = :token",
        ExpressionAttributeNames: {
          "#holder": NAMES["#holder"],
          "#lease": NAMES["#lease"],
          "#leaseEnds": NAMES["#leaseEnds"],
        },
        ExpressionAttributeValues: { ":token": { S: token } },
      }),
      bounded(this.#timeout),
    );
  }
}

/** How many holds an instance watches at most: one per flag its deliveries wait for. */
const WATCHED_MAX = 10_000;

/**
 * The holds of other deliveries this instance has found on flags it waits for, each with when it
 * was first seen on this instance's clock. Instances' clocks differ, so a lease's end written by
 * the holder's clock cannot be compared with the waiter's: as AWS's DynamoDB Lock Client does, a
 * waiter takes a hold over only once it has seen the same hold (its token) unchanged for the whole
 * lease on its own clock. Kept per store instance, so a delivery that gave up (503) and is retried
 * does not start the count again; a hold that changed hands starts it again.
 */
class Watched {
  readonly #seen = new Map<string, { token: string; lease: number; since: number }>();

  /** Notes that `token` holds `pk`; answers how long, in ms, before this instance may take it over. */
  see(pk: string, token: string, lease: number, now: number): number {
    let seen = this.#seen.get(pk);
    if (seen?.token !== token) {
      seen = { token, lease, since: now };
      this.#seen.delete(pk);
      if (this.#seen.size >= WATCHED_MAX) this.#seen.delete(this.#seen.keys().next().value as string);
      this.#seen.set(pk, seen);
    }
    return Math.max(0, seen.since + seen.lease - now);
  }

  /** The hold of `pk` this instance has seen unchanged for its whole lease, if any: the one it may take over. */
  lapsed(pk: string, now: number): string | undefined {
    const seen = this.#seen.get(pk);
    return seen !== undefined && now - seen.since >= seen.lease ? seen.token : undefined;
  }

  /** This instance took `pk`: whatever it watched there is gone. */
  forget(pk: string): void {
    this.#seen.delete(pk);
  }
}
