// What the DynamoDB stores (dedupe, order) share about a request: a bound on its time, how a
// failed condition is told from a failed request, and how a transaction is sent.
import { type DynamoDBClient, type TransactWriteItem, TransactWriteItemsCommand } from "@aws-sdk/client-dynamodb";

/**
 * Bounds a request, the SDK's own retries included: a Lambda waiting on an unreachable endpoint
 * would otherwise sit in them until the function's own timeout. A signal rather than
 * withTimeout: the SDK takes it, and aborting ends the request and its retries rather than
 * leaving them running.
 */
export function bounded(ms: number): { abortSignal: AbortSignal } {
  return { abortSignal: AbortSignal.timeout(ms) };
}

/** Whether a request failed its condition (the item was not as required), not for another reason. */
export function isConditionFailure<Item>(error: unknown): error is { Item?: Item } {
  return (error as { name?: unknown } | null)?.name === "ConditionalCheckFailedException";
}

/** Whether a transaction was cancelled because its item `index` failed its condition. */
export function isCancelledBy(error: unknown, index: number): boolean {
  return cancellations(error)?.[index] === "ConditionalCheckFailed";
}

/** The code of each item's reason, in order, when `error` is a cancelled transaction; undefined otherwise. */
export function cancellations(error: unknown): (string | undefined)[] | undefined {
  const { name, CancellationReasons } = (error ?? {}) as { name?: unknown; CancellationReasons?: { Code?: string }[] };
  if (name !== "TransactionCanceledException" || !Array.isArray(CancellationReasons)) return undefined;
  return CancellationReasons.map((reason) => reason?.Code);
}

/** Whether the endpoint does not know the operation (dynalite, which has no transactions). */
export function isUnknownOperation(error: unknown): boolean {
  return (error as { name?: unknown } | null)?.name === "UnknownOperationException";
}

/** Whether a single write was refused because a transaction was writing its item at that moment. */
export function isTransactionConflict(error: unknown): boolean {
  return (error as { name?: unknown } | null)?.name === "TransactionConflictException";
}

/**
 * Sends `items` in one TransactWriteItems within `timeout` ms. Its ClientRequestToken, which the
 * SDK makes, lets the SDK's retry of a transaction that landed succeed without writing again. A
 * transaction cancelled only because another request was writing one of its items at that moment
 * (a waiting instance's look at a flag, a copy's claim of an id) wrote nothing, and DynamoDB asks
 * for it to be sent again, which the SDK does not do itself: it is, twice at most.
 */
export async function sendTransaction(client: DynamoDBClient, items: TransactWriteItem[], timeout: number) {
  const deadline = bounded(timeout);
  for (let tries = 1; ; tries++) {
    try {
      await client.send(new TransactWriteItemsCommand({ TransactItems: items }), deadline);
      return;
    } catch (error) {
      const reasons = cancellations(error);
      if (!reasons?.includes("TransactionConflict") || reasons.includes("ConditionalCheckFailed") || tries === 3) {
        throw error;
      }
      await new Promise((resolve) => setTimeout(resolve, 10 * tries));
    }
  }
}
