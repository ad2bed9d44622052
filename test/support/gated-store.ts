import { MemoryDedupeStore } from "flag-webhooks";

/**
 * A memory store whose `complete` waits until the test opens it, and says when it has recorded:
 * a 2xx answer with it is held (node/watch-answer.ts) for as long as the test keeps it shut, where
 * a plain MemoryDedupeStore records at once and lets the answer leave unheld.
 */
export class GatedStore extends MemoryDedupeStore {
  recorded = false;
  #open: () => void = () => {};
  readonly #gate = new Promise<void>((resolve) => {
    this.#open = resolve;
  });
  open(): void {
    this.#open();
  }
  override async complete(id: string, ttl: number): Promise<void> {
    await this.#gate;
    await super.complete(id, ttl);
    this.recorded = true;
  }
}
