// The test kit's part for ordered delivery: a history of related events for one flag, a
// shuffled copy of it with duplicates (as senders deliver), and a mirror of flag state to check
// that what a receiver applied equals what applying the history in order gives.
import { comparePositions, positionOf } from "../delivery/order/position.js";
import type { KnownWebhookEvent, WebhookEvent } from "../events.js";

/** Options of {@link flagHistory}. */
export interface FlagHistoryOptions {
  /** The flag's key; default `"new-checkout"`. */
  flag?: string;
  /** The environments changed; default `["production", "staging"]`. */
  environments?: string[];
  /** The fields changed; default `["on", "rollout.percent"]`. */
  paths?: string[];
  /** How many events; default 20. */
  length?: number;
  /** When the first event happened; default now. */
  start?: Date | string;
  /** The same seed gives the same history; default 1. */
  seed?: number;
}

/**
 * A history of related events for one flag, in the order they happened: `flag.created`, then
 * `flag.updated` events on random fields (now and then with the same `createdAt` as the event
 * before: ties the order breaks by id), and now and then a `flag.deleted` followed by a new
 * `flag.created`. Ids rise with the history, so its order is the order of positions.
 *
 * @example
 * ```ts
 * const history = flagHistory({ length: 30 });
 * for (const event of shuffledCopy(history)) await send(event); // then compare with FlagMirror
 * ```
 */
export function flagHistory(options: FlagHistoryOptions = {}): KnownWebhookEvent[] {
  const { flag = "new-checkout", length = 20, seed = 1 } = options;
  const environments = options.environments ?? ["production", "staging"];
  const paths = options.paths ?? ["on", "rollout.percent"];
  const random = seeded(seed);
  let at = new Date(options.start ?? Date.now()).getTime();
  const run = `${seed.toString(36)}${Math.floor(random() * 1e9).toString(36)}`;
  const events: KnownWebhookEvent[] = [];
  let deleted = false;
  for (let index = 0; index < length; index++) {
    // About one event in four shares its createdAt with the one before.
    if (index > 0 && random() >= 0.25) at += 1 + Math.floor(random() * 1000);
    const base = {
      id: `evt_${run}_${String(index).padStart(6, "0")}`,
      createdAt: new Date(at).toISOString(),
      environment: pick(environments, random),
    };
    if (index === 0 || deleted) {
      events.push({ ...base, type: "flag.created", data: { flag } });
      deleted = false;
    } else if (random() < 0.08) {
      events.push({ ...base, type: "flag.deleted", data: { flag } });
      deleted = true;
    } else {
      const path = pick(paths, random);
      const to = path === "on" ? random() < 0.5 : Math.floor(random() * 101);
      const changes = [{ path, from: null, to }];
      events.push({
        ...base,
        type: "flag.updated",
        data: { flag, changes, actor: { type: "user", email: "dana@example.com" } },
      });
    }
  }
  return events;
}

/**
 * A copy of `events` as a sender may deliver them: every event at least once, some twice
 * (`duplicates`, the share sent again; default 0.3), in a random order (the same `seed` gives
 * the same order).
 */
export function shuffledCopy<Event>(
  events: readonly Event[],
  options: { seed?: number; duplicates?: number } = {},
): Event[] {
  const random = seeded(options.seed ?? 1);
  const duplicates = options.duplicates ?? 0.3;
  const copy = [...events, ...events.filter(() => random() < duplicates)];
  for (let i = copy.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [copy[i], copy[j]] = [copy[j] as Event, copy[i] as Event];
  }
  return copy;
}

/** `events` sorted by position (`createdAt` as an instant, then id): the order the rule applies. */
export function inOrder<Event extends WebhookEvent>(events: readonly Event[]): Event[] {
  return [...events].sort((a, b) => comparePositions(positionOf(a), positionOf(b)));
}

/**
 * The state of flags as a receiver that mirrors them would keep it: a value per flag,
 * environment and path. `apply` each event the handler sees: `flag.updated` sets its changes,
 * `flag.created` and `flag.deleted` clear the flag (but for its `keptFields`, for a late one).
 * Applying a history in order ({@link inOrder}) gives the state to expect.
 */
export class FlagMirror {
  /** The value of each field, by the JSON of `[flag, environment, path]`. */
  readonly fields = new Map<string, unknown>();

  apply(event: WebhookEvent): void {
    const flag = (event.data as { flag?: unknown } | undefined)?.flag;
    if (typeof flag !== "string") return;
    if (event.type === "flag.updated") {
      for (const change of event.data.changes) {
        this.fields.set(JSON.stringify([flag, event.environment, change.path]), change.to);
      }
    } else if (event.type === "flag.created" || event.type === "flag.deleted") {
      // A late one resets every field of the flag but those changed after it (`keptFields`).
      const kept = event.keptFields?.map(({ environment, path }) => JSON.stringify([flag, environment, path]));
      for (const key of this.fields.keys()) {
        if ((JSON.parse(key) as string[])[0] === flag && !kept?.includes(key)) this.fields.delete(key);
      }
    }
  }

  /** The fields and their values, sorted by key: two mirrors with the same state give equal objects. */
  snapshot(): Record<string, unknown> {
    return Object.fromEntries([...this.fields].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
  }
}

/** mulberry32: a small seeded generator, so a history and its shuffle can be reproduced. */
function seeded(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function pick<T>(items: readonly T[], random: () => number): T {
  return items[Math.floor(random() * items.length)] as T;
}
