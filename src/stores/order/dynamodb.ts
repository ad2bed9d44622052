// Ordered delivery's positions on DynamoDB: one item per flag, holding the flag's positions and
// the hold on it together, so that taking the hold and reading the positions is one conditional
// write, and writing the new positions and ending the hold is another. One item per flag rather
// than per field: the rule decides a whole event at once over every field of its flag (a
// flag.deleted resets them all), so the unit the hold protects is the flag.
import { type AttributeValue, type DynamoDBClient, PutItemCommand, UpdateItemCommand } from "@aws-sdk/client-dynamodb";
import type { FlagPositions } from "../../delivery/order/rule.js";
import { checkScope, claimToken, scopedKey } from "../../store-contract/keys.js";
import type { OrderHold, OrderStore } from "../../store-contract/order-store.js";
import { parseDuration, TIMER_MAX } from "../../util/duration.js";
import { bounded, isConditionFailure } from "../dynamodb-requests.js";
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

const NAMES = {
  "#holder": "holder",
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
 * over (its late commit writes nothing). Positions expire `retention` after their last write.
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
    const positions = await this.#turns.take(flag, () => this.#attempt(pk, token, lease));
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
          await (next ? this.#write(pk, token, next) : this.#unhold(pk, token));
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

  /** Takes the hold if no live one is there, and reads the positions with it. */
  async #attempt(pk: string, token: string, lease: number): Promise<Attempt<FlagPositions | undefined>> {
    const now = Date.now();
    try {
      const { Attributes } = await this.#client.send(
        new UpdateItemCommand({
          TableName: this.#table,
          Key: { pk: { S: pk } },
          // A new item (no positions yet) expires with the lease, so a hold alone is not kept.
          UpdateExpression:
            "SET #holder = :token, #leaseEnds = :leaseEnds, #expiresAt = if_not_exists(#expiresAt, :seconds), #expiresAtMs = if_not_exists(#expiresAtMs, :leaseEnds)",
          ConditionExpression: "attribute_not_exists(#holder) OR #leaseEnds <= :now",
          ExpressionAttributeNames: NAMES,
          ExpressionAttributeValues: {
            ":token": { S: token },
            ":leaseEnds": { N: String(now + lease) },
            ":seconds": { N: String(Math.ceil((now + lease) / 1000)) },
            ":now": { N: String(now) },
          },
          ReturnValues: "ALL_NEW",
          ReturnValuesOnConditionCheckFailure: "ALL_OLD",
        }),
        bounded(this.#timeout),
      );
      // Positions past their expiry are absent, though DynamoDB's TTL has not deleted them yet.
      const text = Number(Attributes?.expiresAtMs?.N) > now ? Attributes?.positions?.S : undefined;
      return { hold: text === undefined ? undefined : (JSON.parse(text) as FlagPositions) };
    } catch (error) {
      if (!isConditionFailure<Record<string, AttributeValue>>(error)) throw error;
      const ends = Number(error.Item?.leaseEnds?.N);
      return { left: Number.isFinite(ends) ? ends - now : undefined };
    }
  }

  /**
   * Writes the positions and ends the hold in one request, if the hold is still this one's, or the
   * item is gone (DynamoDB's TTL deleted expired positions under the hold: no one else took it).
   */
  async #write(pk: string, token: string, next: FlagPositions): Promise<void> {
    const expires = Date.now() + this.retention;
    await this.#client.send(
      new PutItemCommand({
        TableName: this.#table,
        Item: {
          pk: { S: pk },
          positions: { S: JSON.stringify(next) },
          expiresAt: { N: String(Math.ceil(expires / 1000)) },
          expiresAtMs: { N: String(expires) },
        },
        ConditionExpression: "attribute_not_exists(#pk) OR #holder = :token",
        ExpressionAttributeNames: { "#pk": "pk", "#holder": NAMES["#holder"] },
        ExpressionAttributeValues: { ":token": { S: token } },
      }),
      bounded(this.#timeout),
    );
  }

  /** Ends the hold, writing nothing, if it is still this one's. */
  async #unhold(pk: string, token: string): Promise<void> {
    await this.#client.send(
      new UpdateItemCommand({
        TableName: this.#table,
        Key: { pk: { S: pk } },
        UpdateExpression: "REMOVE #holder, #leaseEnds",
        ConditionExpression: "#holder = :token",
        ExpressionAttributeNames: { "#holder": NAMES["#holder"], "#leaseEnds": NAMES["#leaseEnds"] },
        ExpressionAttributeValues: { ":token": { S: token } },
      }),
      bounded(this.#timeout),
    );
  }
}
