// flag-webhooks/dynamodb: a dedupe store and an order store on DynamoDB, for receivers on AWS Lambda.
// @aws-sdk/client-dynamodb is this entry's optional peer: the core and the other entries never
// import it; here only the command classes the stores send are needed at run time, on the user's client.
import {
  type AttributeValue,
  DeleteItemCommand,
  type DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
} from "@aws-sdk/client-dynamodb";
import type { ClaimResult, DedupeStore } from "../store-contract/dedupe-store.js";
import { checkScope, claimToken, scopedKey } from "../store-contract/keys.js";
import { parseDuration, TIMER_MAX } from "../util/duration.js";
import { type ClaimSettlement, transacted } from "./dynamodb-paired.js";
import { bounded, isConditionFailure } from "./dynamodb-requests.js";

export { DynamoDBOrderStore, type DynamoDBOrderStoreOptions } from "./order/dynamodb.js";

/**
 * The dedupe table, in the words CloudFormation (`AWS::DynamoDB::Table` properties, so SAM too)
 * and the SDK's `CreateTable` use: partition key `pk` (a string), on-demand billing, and DynamoDB's
 * TTL on `expiresAt` (epoch seconds) so expired ids are deleted for free. `CreateTable` takes all
 * but `TimeToLiveSpecification`, which `UpdateTimeToLive` takes.
 *
 * @example
 * ```ts
 * import { CreateTableCommand, DynamoDBClient, UpdateTimeToLiveCommand } from "@aws-sdk/client-dynamodb";
 * import { dedupeTable } from "flag-webhooks/dynamodb";
 *
 * const client = new DynamoDBClient({});
 * const { TimeToLiveSpecification, ...table } = dedupeTable;
 * await client.send(new CreateTableCommand({ TableName: "flag-webhooks-dedupe", ...table }));
 * await client.send(new UpdateTimeToLiveCommand({ TableName: "flag-webhooks-dedupe", TimeToLiveSpecification }));
 * ```
 */
export const dedupeTable = {
  AttributeDefinitions: [{ AttributeName: "pk", AttributeType: "S" }],
  KeySchema: [{ AttributeName: "pk", KeyType: "HASH" }],
  BillingMode: "PAY_PER_REQUEST",
  TimeToLiveSpecification: { AttributeName: "expiresAt", Enabled: true },
} as const satisfies {
  AttributeDefinitions: { AttributeName: string; AttributeType: "S" }[];
  KeySchema: { AttributeName: string; KeyType: "HASH" }[];
  BillingMode: "PAY_PER_REQUEST";
  TimeToLiveSpecification: { AttributeName: string; Enabled: boolean };
};

/** Options of {@link DynamoDBDedupeStore}. */
export interface DynamoDBDedupeStoreOptions {
  /** The table's name; its key schema is {@link dedupeTable}'s. */
  table: string;
  /**
   * Keeps endpoints that share the table apart (1-100 characters of `A-Za-z0-9._-`): every
   * instance of one app uses the same scope and shares its ids; another scope never meets them.
   */
  scope: string;
  /**
   * How long one request to DynamoDB may take, the SDK's own retries included, in ms or as a
   * duration such as `"2s"`; past it the request is aborted and the delivery is answered
   * `503 store_unavailable`. Default 2 s (the receiver's own `dedupe.timeout`). At most 2³¹−1 ms
   * (a timer waits no longer), else a `TypeError`.
   */
  timeout?: number | string;
}

const CLAIMED = "claimed";
const DONE = "done";
// Reserved words (STATE, TOKEN…) cannot appear in expressions as they are: every name goes through #.
const NAMES = { "#pk": "pk", "#state": "state", "#token": "token", "#claim": "claim", "#expiresAtMs": "expiresAtMs" };

/**
 * A dedupe store on a DynamoDB table ({@link dedupeTable}), shared by every receiver (Lambda
 * function instances, containers) that uses the same table and `scope`. Strongly consistent per
 * id: a claim is one conditional `PutItem` (written only if the id is absent or its lease or ttl
 * ran out), so of two instances that get the same delivery at the same moment one runs the
 * handler. Each claim also carries a token of its own, which the condition lets through: when the
 * answer to that write is lost and the SDK sends it again, the store finds its own claim and
 * takes it, rather than answering in flight until the lease runs out; when the SDK gives up on
 * it instead, the store deletes that claim, if it landed, and no other. Keys are `scope#id`, a long
 * or unusual id hashed (`scope##<sha256>`, see docs/delivery.md). A delivery costs two requests
 * (claim, then `PutItem` done); a duplicate costs one (the failed condition returns the item that
 * holds the id); a failed handler's release is one `DeleteItem` conditioned on this store's token,
 * so it never frees another instance's claim nor undoes a completed id. Items carry `expiresAt`
 * (epoch seconds) for DynamoDB's TTL, and the store treats an item past its expiry as absent
 * itself, since TTL deletion lags.
 *
 * @example
 * ```ts
 * import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
 * import { DynamoDBDedupeStore } from "flag-webhooks/dynamodb";
 * import { webhookHandler } from "flag-webhooks/lambda";
 *
 * const store = new DynamoDBDedupeStore(new DynamoDBClient({}), { table: process.env.DEDUPE_TABLE!, scope: "flag-audit" });
 * export const handler = webhookHandler({
 *   secret: process.env.WEBHOOK_SECRET!,
 *   maxAge: "5m",
 *   dedupe: { store, ttl: "24h" },
 *   onEvent: (event) => console.log(event.type, event.id),
 * });
 * ```
 */
export class DynamoDBDedupeStore implements DedupeStore {
  readonly #client: DynamoDBClient;
  readonly #table: string;
  readonly #scope: string;
  readonly #timeout: number;
  // The value of this store's claims: release() deletes an item only while it holds this token,
  // so it never frees another instance's claim (as RedisDedupeStore). Per store, not per claim:
  // within one process the receiver releases a claim only while its lease lasts.
  readonly #token = claimToken();

  constructor(client: DynamoDBClient, options: DynamoDBDedupeStoreOptions) {
    if (typeof (client as { send?: unknown } | undefined)?.send !== "function") {
      throw new TypeError("flag-webhooks: DynamoDBDedupeStore needs a DynamoDBClient from @aws-sdk/client-dynamodb");
    }
    const { table, scope, timeout } = options ?? ({} as DynamoDBDedupeStoreOptions);
    if (typeof table !== "string" || table.length < 3) {
      throw new TypeError('flag-webhooks: DynamoDBDedupeStore option "table" must be the name of a DynamoDB table');
    }
    this.#client = client;
    this.#table = table;
    this.#scope = checkScope(scope, "DynamoDBDedupeStore");
    this.#timeout = timeout === undefined ? 2000 : parseDuration(timeout, "timeout", TIMER_MAX);
    transacted.set(this, {
      client,
      table,
      claim: async (id, lease) => {
        const pk = await this.#key(id);
        const claim = claimToken();
        return { result: await this.#claim(pk, claim, lease), settle: this.#settlement(pk, claim) };
      },
    });
  }

  async claim(id: string, lease: number): Promise<ClaimResult> {
    return this.#claim(await this.#key(id), claimToken(), lease);
  }

  /** Claims `pk` with `claim`, this claim's own token: a write the SDK sends again (its answer lost) finds it and goes through. */
  async #claim(pk: string, claim: string, lease: number): Promise<ClaimResult> {
    // Two tries: where the failure does not return the item, the read that replaces it may find
    // it already gone (released, or lapsed); the claim is then tried once more, and a second miss
    // answers in_flight (the sender retries).
    for (let attempt = 1; ; attempt++) {
      const now = Date.now();
      try {
        await this.#client.send(
          new PutItemCommand({
            TableName: this.#table,
            Item: item(pk, CLAIMED, now + lease, { token: { S: this.#token }, claim: { S: claim } }),
            ConditionExpression: "attribute_not_exists(#pk) OR #expiresAtMs <= :now OR #claim = :claim",
            ExpressionAttributeNames: {
              "#pk": NAMES["#pk"],
              "#expiresAtMs": NAMES["#expiresAtMs"],
              "#claim": NAMES["#claim"],
            },
            ExpressionAttributeValues: { ":now": { N: String(now) }, ":claim": { S: claim } },
            ReturnValuesOnConditionCheckFailure: "ALL_OLD",
          }),
          this.#bounded(),
        );
        return "claimed";
      } catch (error) {
        if (!isConditionFailure<Record<string, AttributeValue>>(error)) {
          // It may have landed all the same (its answer lost with no attempt left, or aborted past
          // the timeout): it holds the id for nobody, so free it, this claim only, so the sender's
          // retry is not kept waiting for the lease.
          void this.#forget(pk, claim).catch(() => {});
          throw error;
        }
        // DynamoDB returns the item that failed the condition; an implementation that does not
        // (dynalite, older DynamoDB Local) costs a strongly consistent read.
        const held = error.Item ?? (await this.#get(pk));
        if (held && Number(held.expiresAtMs?.N) > now) return held.state?.S === DONE ? "done" : "in_flight";
        if (attempt === 2) return "in_flight";
      }
    }
  }

  async complete(id: string, ttl: number): Promise<void> {
    await this.#client.send(new PutItemCommand(this.#done(await this.#key(id), ttl)), this.#bounded());
  }

  /** The write that marks `pk` done for `ttl` ms. */
  #done(pk: string, ttl: number): { TableName: string; Item: Record<string, AttributeValue> } {
    return { TableName: this.#table, Item: item(pk, DONE, Date.now() + ttl) };
  }

  /** How the claim `claim` made of `pk` is settled by another store's transaction. */
  #settlement(pk: string, claim: string): ClaimSettlement {
    return { done: (ttl) => ({ Put: this.#done(pk, ttl) }), free: { Delete: this.#forgetting(pk, claim) } };
  }

  async release(id: string): Promise<void> {
    try {
      await this.#client.send(
        new DeleteItemCommand({
          TableName: this.#table,
          Key: { pk: { S: await this.#key(id) } },
          ConditionExpression: "#token = :token AND #state = :claimed",
          ExpressionAttributeNames: { "#token": NAMES["#token"], "#state": NAMES["#state"] },
          ExpressionAttributeValues: { ":token": { S: this.#token }, ":claimed": { S: CLAIMED } },
        }),
        this.#bounded(),
      );
    } catch (error) {
      // Not ours any more (lapsed and claimed by another instance, or completed): leave it.
      if (!isConditionFailure(error)) throw error;
    }
  }

  /** Deletes the claim `claim` made of `pk`, if it is there: never another claim, never a done id. */
  async #forget(pk: string, claim: string): Promise<void> {
    try {
      await this.#client.send(new DeleteItemCommand(this.#forgetting(pk, claim)), this.#bounded());
    } catch (error) {
      if (!isConditionFailure(error)) throw error;
    }
  }

  /** The deletion of the claim `claim` made of `pk`, conditioned on its still being there. */
  #forgetting(pk: string, claim: string) {
    return {
      TableName: this.#table,
      Key: { pk: { S: pk } },
      ConditionExpression: "#claim = :claim AND #state = :claimed",
      ExpressionAttributeNames: { "#claim": NAMES["#claim"], "#state": NAMES["#state"] },
      ExpressionAttributeValues: { ":claim": { S: claim }, ":claimed": { S: CLAIMED } },
    };
  }

  async #get(pk: string): Promise<Record<string, AttributeValue> | undefined> {
    const { Item } = await this.#client.send(
      new GetItemCommand({ TableName: this.#table, Key: { pk: { S: pk } }, ConsistentRead: true }),
      this.#bounded(),
    );
    return Item;
  }

  #key(id: string): Promise<string> {
    return scopedKey(this.#scope, id);
  }

  #bounded(): { abortSignal: AbortSignal } {
    return bounded(this.#timeout);
  }
}

/**
 * The item of an id: its state and expiry (ms for the store, epoch seconds for DynamoDB's TTL),
 * and a claim's tokens (the store's and the claim's own).
 */
function item(
  pk: string,
  state: string,
  expiresAtMs: number,
  tokens?: Record<string, AttributeValue>,
): Record<string, AttributeValue> {
  return {
    pk: { S: pk },
    state: { S: state },
    expiresAt: { N: String(Math.ceil(expiresAtMs / 1000)) },
    expiresAtMs: { N: String(Math.ceil(expiresAtMs)) },
    ...tokens,
  };
}
