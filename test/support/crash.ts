import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { signatureOf } from "./deliveries.js";
import { type Started, startProcess, untilPrinted } from "./processes.js";

// The crash tests of the inboxes (Postgres, SQLite, D1) share one harness, so that "exactly once
// through crashes" means the same sender, the same killer and the same count everywhere: receiver
// processes (processes.ts) watched for what they print, a sender that retries every non-2xx and broken
// connection, a killer that SIGKILLs a receiver while it is inside a handler and starts it again.
// Each test keeps only what differs: the receiver it starts and where it counts the effects.

/**
 * Starts a receiver process (see {@link startProcess}) and waits until it prints "listening"
 * (polling every `poll` ms, for at most `within` ms).
 */
export async function startReceiverProcess(
  label: string,
  command: string,
  args: string[],
  options: Parameters<typeof startProcess>[2] & { within?: number; poll?: number } = {},
): Promise<Started> {
  const { within, poll, ...spawnOptions } = options;
  const started = startProcess(command, args, spawnOptions);
  await untilPrinted(label, started, "listening", { within, poll });
  return started;
}

/** What the sender saw: answers by status, and broken connections. */
export interface Tally {
  statuses: Map<number, number>;
  broken: number;
}

/** A tally with nothing counted yet. */
export const newTally = (): Tally => ({ statuses: new Map(), broken: 0 });

/**
 * Delivers one signed copy of `text` to POST /webhooks on the port `port()` names at each attempt
 * (a receiver restarted meanwhile may be elsewhere) until it gets a 2xx, retrying every other
 * answer and every broken connection after `pause` ms, as the service retries.
 */
export async function deliverUntilOk(
  port: () => number,
  text: string,
  secret: string,
  tally: Tally,
  { attempts = 2000, pause = 20 } = {},
): Promise<void> {
  for (let attempt = 0; attempt < attempts; attempt++) {
    try {
      const answer = await fetch(`http://127.0.0.1:${port()}/webhooks`, {
        method: "POST",
        headers: { "content-type": "application/json", "service-signature": await signatureOf(secret, text) },
        body: text,
        signal: AbortSignal.timeout(10_000),
      });
      await answer.arrayBuffer();
      tally.statuses.set(answer.status, (tally.statuses.get(answer.status) ?? 0) + 1);
      if (answer.status >= 200 && answer.status < 300) return;
    } catch {
      tally.broken++;
    }
    await sleep(pause);
  }
  throw new Error("a delivery never got a 2xx");
}

/** Runs `work` over `items`, `concurrency` at a time. */
export async function pool<T>(items: T[], concurrency: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < items.length) await work(items[next++] as T);
    }),
  );
}

/** The killer's record: its kills, those that landed inside a handler, and what each victim printed. */
export interface Killer {
  kills: number;
  midHandler: number;
  outputs: string[];
  /** Whether it has done all its rounds (or was stopped). */
  done: boolean;
  /** Stops it after the round under way, and waits for that round to end. */
  stop(): Promise<void>;
}

/**
 * For `rounds` rounds, takes the receivers in turn: waits (up to `wait` ms) until the target is
 * inside a handler (it printed one more line matching `started`, its effect written but not
 * committed), SIGKILLs it there, puts `restart(target)` in its place in `receivers`, and lets
 * `pause` ms pass before the next round.
 */
export function killInsideHandlers<P extends Started>(
  receivers: P[],
  options: { rounds: number; started: RegExp; restart: (killed: P) => Promise<P>; wait?: number; pause?: number },
): Killer {
  const { rounds, started, restart, wait = 5000, pause = 100 } = options;
  const starts = (receiver: P) => (receiver.output.match(started) ?? []).length;
  let sending = true;
  const killer: Killer = { kills: 0, midHandler: 0, outputs: [], done: false, stop: async () => {} };
  const run = (async () => {
    for (let round = 0; sending && round < rounds; round++) {
      const index = round % receivers.length;
      const target = receivers[index] as P;
      const seen = starts(target);
      for (let waited = 0; sending && starts(target) === seen && waited < wait; waited += 2) await sleep(2);
      if (!sending) break;
      if (starts(target) > seen) killer.midHandler++;
      await target.kill();
      killer.kills++;
      killer.outputs.push(target.output);
      receivers[index] = await restart(target);
      await sleep(pause);
    }
  })().finally(() => {
    killer.done = true;
  });
  killer.stop = async () => {
    sending = false;
    await run;
  };
  return killer;
}

/**
 * Sends fresh events (`evt_<uuid>`) in batches of `batch`, all of a batch at once, until at least
 * `atLeast` went out and `enough()` holds, or `within` ms passed (a loaded machine may run the
 * handlers slower than the kills need); `send` delivers one event, the index its place in the run.
 */
export async function sendInBatches(
  options: { atLeast: number; enough: () => boolean; batch?: number; within?: number },
  send: (id: string, index: number) => Promise<void>,
): Promise<string[]> {
  const { atLeast, enough, batch = 6, within = 40_000 } = options;
  const ids: string[] = [];
  const deadline = Date.now() + within;
  while ((ids.length < atLeast || !enough()) && Date.now() < deadline) {
    const fresh = Array.from({ length: batch }, () => `evt_${randomUUID()}`);
    const first = ids.length;
    ids.push(...fresh);
    await pool(fresh, batch, (id) => send(id, first + fresh.indexOf(id)));
  }
  return ids;
}

/** The events of `ids` with no effect, and those with more than one, from a count of effects per event. */
export function lostAndDoubled(ids: string[], effects: Map<string, number>) {
  return {
    lost: ids.filter((id) => !effects.has(id)),
    doubled: ids.filter((id) => (effects.get(id) ?? 0) > 1),
  };
}
