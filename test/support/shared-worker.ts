// vitest setupFiles of the test files that share workers (vitest.config.ts, project "shared"): run
// before each file, it gives the file the globals a new process would have. A library a file
// loads may replace one for the whole process (@hono/node-server's server puts its own Request
// and Response on globalThis, whose string bodies carry no content type): put back, the next file
// in the worker sees Node's own again. The first run in a worker keeps what it found, before any
// test file ran. (Node's lazy globals, Blob or Headers, turn from getters into values once read:
// putting the getter back gives the same object.)

const KEY = Symbol.for("flag-webhooks.test.pristine-globals");
type Pristine = Map<PropertyKey, PropertyDescriptor>;
const holder = globalThis as { [KEY]?: Pristine };

holder[KEY] ??= new Map(
  Reflect.ownKeys(globalThis)
    // vitest's own (__vitest_worker__ and the like) change from file to file by design.
    .filter((key) => typeof key !== "string" || !key.startsWith("__"))
    .map((key) => [key, Object.getOwnPropertyDescriptor(globalThis, key) as PropertyDescriptor]),
);
const pristine = holder[KEY];

for (const [key, descriptor] of pristine) {
  const now = Object.getOwnPropertyDescriptor(globalThis, key);
  if (Object.is(now?.value, descriptor.value) && now?.get === descriptor.get && now?.set === descriptor.set) continue;
  Object.defineProperty(globalThis, key, descriptor);
}
