// What a DynamoDBDedupeStore lends a DynamoDBOrderStore on the same client and table: its claim,
// and the writes that settle it, so that the order store's transaction marks the event's id done
// in the very request that commits its flag's positions. The id's item and what its states mean
// stay the dedupe store's (../stores/dynamodb.ts). Internal, not exported by the package.
import type { DynamoDBClient, TransactWriteItem } from "@aws-sdk/client-dynamodb";
import type { ClaimResult } from "../store-contract/dedupe-store.js";

/**
 * A dedupe store's claim that another store on the same client and table settles in its own
 * transaction.
 */
export interface TransactedClaim {
  readonly client: DynamoDBClient;
  readonly table: string;
  claim(id: string, lease: number): Promise<{ result: ClaimResult; settle: ClaimSettlement }>;
}

/** How one claim is settled, inside another store's transaction or, where it cannot be, alone. */
export interface ClaimSettlement {
  /** The write that marks the id done for `ttl` ms, as DynamoDBDedupeStore's `complete` does. */
  done(ttl: number): TransactWriteItem;
  /** The deletion of this claim (by its own token): never another claim, never a done id. */
  readonly free: TransactWriteItem;
  /** {@link done}, sent alone. */
  complete(ttl: number): Promise<void>;
  /** {@link free}, sent alone; a claim that is no longer this one's is left as it is. */
  forget(): Promise<void>;
}

/** Each DynamoDBDedupeStore's, set by its constructor. */
export const transacted = new WeakMap<object, TransactedClaim>();

/** The transacted claim of `store` when it is a DynamoDBDedupeStore; undefined for any other store. */
export function transactedClaim(store: unknown): TransactedClaim | undefined {
  return typeof store === "object" && store !== null ? transacted.get(store) : undefined;
}
