// Ordered delivery's positions on DynamoDB: one item per flag, holding the flag's positions and
// the hold on it together, so that taking the hold and reading the positions is one conditional
// write, and writing the new positions and ending the hold is another. One item per flag rather
// than per field: the rule decides a whole event at once over every field of its flag (a
// flag.deleted resets them all), so the unit the hold protects is the flag.
import {
  type AttributeValue,
  DeleteItemCommand,
  type DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  type TransactWriteItem,
  UpdateItemCommand,
} from "@aws-sdk/client-dynamodb";
import type { FlagPositions } from "../../delivery/order/rule.js";
import type { DedupeStore } from "../../store-contract/dedupe-store.js";
import { checkScope, claimToken, scopedKey } from "../../store-contract/keys.js";
import type { OrderHold, OrderStore } from "../../store-contract/order-store.js";
import { parseDuration, TIMER_MAX } from "../../util/duration.js";
import { type ClaimSettlement, transactedClaim } from "../dynamodb-paired.js";
import {
  bounded,
  cancellations,
  isCancelledBy,
  isConditionFailure,
  isTransactionConflict,
  isUnknownOperation,
  sendTransaction,
} from "../dynamodb-requests.js";
import { cut, readParts, type Stored, storedIn, writeParts } from "./dynamodb-parts.js";
import { Watched } from "./dynamodb-watched.js";
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
  /**
   * Whether a delivery with a `DynamoDBDedupeStore` on the same client and table ends in one
   * `TransactWriteItems`: its id marked done with the commit of its flag's positions (3 requests a
   * delivery, not 4; a transaction costs twice the write units). Default true. An endpoint without
   * transactions (dynalite) is found out by its answer, `UnknownOperationException`, and the store
   * then writes them apart for good; `false` never tries.
   */
  transactions?: boolean;
}

/** What a hold read: the flag's positions, and where they were kept (parts to delete once replaced). */
type Read = { positions: FlagPositions | undefined; stored: Stored };

/** The dedupe claim a hold's end settles too (marked done for `ttl` ms, or freed). */
type Settling = { settle: ClaimSettlement; ttl: number };

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
  #transactions: boolean;

  constructor(client: DynamoDBClient, options: DynamoDBOrderStoreOptions) {
    if (typeof (client as { send?: unknown } | undefined)?.send !== "function") {
      throw new TypeError("flag-webhooks: DynamoDBOrderStore needs a DynamoDBClient from @aws-sdk/client-dynamodb");
    }
    const {
      table,
      scope,
      retention = 86_400_000,
      timeout,
      transactions = true,
    } = options ?? ({} as DynamoDBOrderStoreOptions);
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
    this.#transactions = transactions !== false;
  }

  async hold(flag: string, lease: number): Promise<OrderHold> {
    const pk = await this.#pk(flag);
    const token = claimToken();
    return this.#held(flag, pk, token, await this.#turns.take(flag, () => this.#attempt(pk, token, lease)));
  }

  /**
   * With a DynamoDBDedupeStore on this client and table (and `transactions` on): its claim, then
   * one attempt at the hold; a delivery that took both ends with one TransactWriteItems, the id
   * marked done with the commit (or freed with the release). When the flag is held, the receiver
   * waits for it with {@link hold}, and that delivery ends as one without dedupe's help does.
   */
  pairedClaim(dedupe: DedupeStore): ReturnType<NonNullable<OrderStore["pairedClaim"]>> {
    const transacted = transactedClaim(dedupe);
    if (!this.#transactions || transacted?.client !== this.#client || transacted.table !== this.#table) {
      return undefined;
    }
    return async (id, claimLease, flag, holdLease, ttl) => {
      const { result, settle } = await transacted.claim(id, claimLease);
      if (result !== "claimed" || !this.#transactions) return { claim: result, hold: undefined };
      const pk = await this.#pk(flag);
      const token = claimToken();
      let found: Attempt<Read>;
      try {
        found = await this.#attempt(pk, token, holdLease);
      } catch {
        // It may have landed: a hold for nobody. The receiver holds the flag again, and fails there.
        void this.#unhold(pk, token).catch(() => undefined);
        return { claim: result, hold: undefined };
      }
      if (!("hold" in found)) return { claim: result, hold: undefined };
      this.#turns.taken(flag);
      return { claim: result, hold: this.#held(flag, pk, token, found.hold, { settle, ttl }), settles: true };
    };
  }

  #pk(flag: string): Promise<string> {
    return scopedKey(this.#scope, flag).then((key) => `order:${key}`);
  }

  /** The hold `token` took on `flag` (item `pk`), which read `read`; `settling`: the claim its end settles too. */
  #held(flag: string, pk: string, token: string, read: Read, settling?: Settling): OrderHold {
    let ended = false;
    const end = () => {
      ended = true;
      this.#turns.ended(flag);
    };
    return {
      positions: read.positions,
      commit: async (next) => {
        if (ended) throw new Error("flag-webhooks: this hold has ended");
        try {
          await this.#end(pk, token, next, read.stored, settling);
        } catch (error) {
          if (isConditionFailure(error) || isCancelledBy(error, 0))
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
        await this.#release(pk, token, settling).catch(() => undefined);
        end();
      },
    };
  }

  /**
   * Writes the positions (or, with none, only ends the hold), and with `settling` marks its id
   * done: in one transaction, so that a hold that ran out stops the done mark too and the event
   * runs again on the sender's retry, rather than being marked done unapplied.
   */
  async #end(
    pk: string,
    token: string,
    next: FlagPositions | undefined,
    before: Stored,
    settling?: Settling,
  ): Promise<void> {
    const also = settling && this.#transactions ? settling.settle.done(settling.ttl) : undefined;
    try {
      await (next ? this.#write(pk, token, next, before, also) : this.#unhold(pk, token, also));
    } catch (error) {
      if (also === undefined || !isUnknownOperation(error)) throw error;
      this.#transactions = false;
      return this.#end(pk, token, next, before, settling);
    }
    // Without transactions, the done mark follows the commit. Its failure leaves the id claimed
    // until its lease ends: a copy after that finds the positions written, and is stale.
    if (settling && also === undefined) {
      await this.#send(new PutItemCommand(settling.settle.done(settling.ttl).Put)).catch(() => undefined);
    }
  }

  /** Ends the hold, and with `settling` frees its claim: in one transaction when it can. */
  async #release(pk: string, token: string, settling?: Settling): Promise<void> {
    if (!settling) return this.#unhold(pk, token);
    if (this.#transactions) {
      try {
        return await this.#unhold(pk, token, settling.settle.free);
      } catch (error) {
        const reasons = cancellations(error);
        if (reasons) {
          // Each that was not refused by its condition (no longer this delivery's: a hold that ran
          // out, a claim that lapsed) goes alone: one a conflict cancelled is still to be ended.
          const mine = (reason: string | undefined) => reason !== "ConditionalCheckFailed";
          await Promise.allSettled([
            mine(reasons[0]) ? this.#unhold(pk, token) : undefined,
            mine(reasons[1]) ? this.#forget(settling) : undefined,
          ]);
          return;
        }
        if (isUnknownOperation(error)) this.#transactions = false;
        // Else it failed for a reason of the moment (a throttle the SDK gave up on, the network):
        // each is tried alone, so neither is left to its lease for the other's sake.
      }
    }
    await Promise.allSettled([this.#unhold(pk, token), this.#forget(settling)]);
  }

  /** Deletes the claim `settling` settles, alone, if it is still that claim. */
  async #forget(settling: Settling): Promise<void> {
    await this.#send(new DeleteItemCommand(settling.settle.free.Delete)).catch((error: unknown) => {
      if (!isConditionFailure(error)) throw error;
    });
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
      // A transaction (another instance's commit) was writing the item at that moment: it is held.
      if (isTransactionConflict(error)) return { left: undefined };
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
  async #write(pk: string, token: string, next: FlagPositions, before: Stored, also?: TransactWriteItem) {
    const expires = Date.now() + this.retention;
    const expiry = { expiresAt: { N: String(Math.ceil(expires / 1000)) }, expiresAtMs: { N: String(expires) } };
    const { attributes, parts } = cut(token, JSON.stringify(next));
    const written = { by: token, count: parts.length };
    if (parts.length > 0) await writeParts(this.#client, this.#table, pk, { by: token, parts, expiry }, this.#timeout);
    try {
      await this.#put(pk, token, { ...attributes, ...expiry }, also);
    } catch (error) {
      // Parts no flag item names: deleted now rather than kept until their expiry.
      void writeParts(this.#client, this.#table, pk, { delete: written }, this.#timeout).catch(() => undefined);
      throw error;
    }
    // The parts the flag's item named before: no hold reads them any more.
    void writeParts(this.#client, this.#table, pk, { delete: before }, this.#timeout).catch(() => undefined);
  }

  /**
   * Puts the flag's item (no hold on it), if the hold is still `token`'s or the item is gone; with
   * `also`, in one transaction with it.
   */
  async #put(pk: string, token: string, attributes: Record<string, AttributeValue>, also?: TransactWriteItem) {
    const put = {
      TableName: this.#table,
      Item: { pk: { S: pk }, ...attributes },
      ConditionExpression: "attribute_not_exists(#pk) OR #holder = :token",
      ExpressionAttributeNames: { "#pk": "pk", "#holder": NAMES["#holder"] },
      ExpressionAttributeValues: { ":token": { S: token } },
    };
    await this.#send(also ? { transact: [{ Put: put }, also] } : new PutItemCommand(put));
  }

  /** Sends a command, or a transaction of `transact`'s writes ({@link sendTransaction}). */
  async #send(
    command: PutItemCommand | UpdateItemCommand | DeleteItemCommand | { transact: TransactWriteItem[] },
  ): Promise<void> {
    if (!("transact" in command)) {
      await this.#client.send(command as PutItemCommand, bounded(this.#timeout));
      return;
    }
    await sendTransaction(this.#client, command.transact, this.#timeout);
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

  /** Ends the hold, writing nothing, if it is still this one's; with `also`, in one transaction with it. */
  async #unhold(pk: string, token: string, also?: TransactWriteItem): Promise<void> {
    const update = {
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
    };
    await this.#send(also ? { transact: [{ Update: update }, also] } : new UpdateItemCommand(update));
  }
}
