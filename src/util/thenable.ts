/**
 * Whether a value is a promise or any thenable (a Promise of another realm, a library's own): what
 * a user's store or handler returns is awaited whatever promise type it is.
 */
export function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    (typeof value === "object" || typeof value === "function") &&
    value !== null &&
    typeof (value as { then?: unknown }).then === "function"
  );
}

/**
 * Goes on with `next` now when `value` is already there, or once it resolves; `fail` takes what
 * `value` rejects with, or what reading it threw. Lets a pipeline stay synchronous, and take no
 * promise of its own, for as long as every step it runs is. (Not named `then`: a module exporting
 * `then` is itself a thenable, which `await import()` would call.)
 */
export function andThen<T, R>(
  value: T | PromiseLike<T>,
  next: (value: T) => R,
  fail: (error: unknown) => R,
): R | Promise<Awaited<R>> {
  if (!isThenable(value)) return next(value as T);
  return Promise.resolve(value).then(next, fail) as Promise<Awaited<R>>;
}
