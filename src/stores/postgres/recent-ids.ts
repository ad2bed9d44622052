// The ids an inbox met lately, handled or answered as duplicates: a hint for how to look at the
// next copy, never an answer by itself.

/**
 * At most `size` ids, the one met longest ago forgotten first. An inbox reads the state of an id
 * it holds before claiming it: a copy of an event this process handled, or answered as a duplicate,
 * is answered from that one read, while a new id (never here) goes to its claim at once, without
 * paying for a read that would find nothing.
 */
export class RecentIds {
  readonly #ids = new Set<string>();
  readonly #size: number;

  // A thousand stored ids, of at most 1 kB each (a longer id is stored as its hash): a copy of one
  // of them is answered from one read; of another, from its claim, at one round trip more.
  constructor(size = 1000) {
    this.#size = size;
  }

  /** Whether `id` was met lately. */
  has(id: string): boolean {
    return this.#ids.has(id);
  }

  /** Remembers `id` as met now, forgetting the one met longest ago past `size`. */
  add(id: string): void {
    this.#ids.delete(id);
    this.#ids.add(id);
    if (this.#ids.size > this.#size) this.#ids.delete(this.#ids.values().next().value as string);
  }
}
