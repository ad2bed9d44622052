import { setTimeout as sleep } from "node:timers/promises";

/**
 * Counts a handler's runs and the most that ran at once, the two numbers "never a second,
 * concurrent run" is read from: `work(ms)` is one run that takes `ms`.
 */
export function runCounter() {
  const count = { runs: 0, running: 0, most: 0 };
  return {
    count,
    async work(ms: number): Promise<void> {
      count.runs++;
      count.running++;
      count.most = Math.max(count.most, count.running);
      await sleep(ms);
      count.running--;
    },
  };
}
