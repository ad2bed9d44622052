// What a DynamoDBDedupeStore lends a DynamoDBOrderStore on the same client and table: its claim,
// and the writes that settle it, so that the order store's transaction marks the event's id done
// in the very request that commits its flag's positions. The id's item and what its states mean
// stay the dedupe store's (../stores/dynamodb.ts). Internal, not exported by the package.
import type { Delete, DynamoDBClient, Put } from "@aws-sdk/client-dynamodb";
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

/** How one claim is settled: the writes, to send in another store's transaction or alone. */
export interface ClaimSettlement {
  /** The write that marks the id done for `ttl` ms, as DynamoDBDedupeStore's `complete` does. */
  done(ttl: number): { Put: Put };
  /** The deletion of this claim, conditioned on its own token: never another claim, never a done id. */
  readonly free: { Delete: Delete };
}

/** Each DynamoDBDedupeStore's, set by its constructor. */
export const transacted = new WeakMap<object, TransactedClaim>();

/** The transacted claim of `store` when it is a DynamoDBDedupeStore; undefined for any other store. */
export function transactedClaim(store: unknown): TransactedClaim | undefined {
  return typeof store === "object" && store !== null ? transacted.get(store) : undefined;
}
