import { isThenable } from "./thenable.js";

/**
 * A value or promise, bounded in time: past `ms` it rejects with what `expired()` makes, and
 * `late` sees a value that arrived after that (a claim that landed once we had given up, which
 * must be undone). Any thenable counts; one that rejects after the time changes nothing. A value
 * that is no thenable resolves at once, with no timer.
 */
export function withTimeout<T>(
  value: T | PromiseLike<T>,
  ms: number,
  expired: () => unknown,
  late?: (value: T) => void,
): Promise<T> {
  if (!isThenable(value)) return Promise.resolve(value as T);
  return new Promise<T>((resolve, reject) => {
    let done = false;
    const timer = setTimeout(() => {
      done = true;
      reject(expired());
    }, ms);
    // Promise.resolve adopts any thenable; its own then may throw, which rejects here too.
    Promise.resolve(value as PromiseLike<T>).then(
      (result) => {
        clearTimeout(timer);
        if (done) late?.(result);
        else resolve(result);
      },
      (error) => {
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}
