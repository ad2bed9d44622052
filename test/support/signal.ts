/**
 * A one-time signal between a test and the code it runs: `fired` resolves once `fire()` has been
 * called `times` times (later calls do nothing). Tests wait on it for the event they mean (a
 * handler started, a client left, a store recorded an id) instead of waiting a fixed time, which a
 * loaded machine overruns and an idle one wastes.
 */
export function signal(times = 1): { fired: Promise<void>; fire: () => void } {
  let left = times;
  let resolve = () => {};
  const fired = new Promise<void>((settle) => {
    resolve = settle;
  });
  const fire = () => {
    if (--left === 0) resolve();
  };
  return { fired, fire };
}
