/**
 * A one-time signal between a test and the code it runs: `fire()` resolves `fired`, once (later
 * calls do nothing). Tests wait on it for the event they mean (a handler started, a client left)
 * instead of waiting a fixed time, which a loaded machine overruns and an idle one wastes.
 */
export function signal(): { fired: Promise<void>; fire: () => void } {
  let fire = () => {};
  const fired = new Promise<void>((resolve) => {
    fire = resolve;
  });
  return { fired, fire };
}
