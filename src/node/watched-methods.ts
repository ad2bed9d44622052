import type { ServerResponse } from "node:http";

type Args = unknown[];
/** Node's response with the old name of writeHead (deprecated in its docs, still there), untyped. */
export type Response = ServerResponse & { writeHeader: ServerResponse["writeHead"] };
/** The methods watched from the start: every way an answer begins, ends or is cut. */
export type Original = Pick<Response, "writeHeader"> &
  Pick<ServerResponse, "writeHead" | "flushHeaders" | "write" | "end" | "destroy">;

/** What answers for a watched response's methods (the answer's watch). */
export interface Watcher {
  writeHead(res: ServerResponse, args: Args): ServerResponse;
  flushHeaders(res: ServerResponse): void;
  write(res: ServerResponse, args: Args): boolean;
  end(res: ServerResponse, args: Args): ServerResponse;
  destroy(res: ServerResponse, error?: Error): ServerResponse;
}

/** The watch a watched response carries, for the shared methods to find. */
const WATCH = Symbol("flag-webhooks.answer-watch");
type Watched = Response & { [WATCH]?: Watcher };

/** What each watched method does, given the watch that answers for it. */
const CALLS = {
  writeHead: (watch: Watcher, res: ServerResponse, args: Args) => watch.writeHead(res, args),
  flushHeaders: (watch: Watcher, res: ServerResponse) => watch.flushHeaders(res),
  write: (watch: Watcher, res: ServerResponse, args: Args) => watch.write(res, args),
  end: (watch: Watcher, res: ServerResponse, args: Args) => watch.end(res, args),
  destroy: (watch: Watcher, res: ServerResponse, args: Args) => watch.destroy(res, args[0] as Error | undefined),
};
type Watchable = keyof typeof CALLS;

/** Method `name` of every watched response: its watch's, or Node's own on a response without one. */
function shared(name: Watchable) {
  return function watched(this: Watched, ...args: Args): unknown {
    const watch = this[WATCH];
    if (watch === undefined) return (Object.getPrototypeOf(this)[name] as (...args: Args) => unknown).apply(this, args);
    return CALLS[name](watch, this, args);
  };
}

const SHARED = {
  writeHead: shared("writeHead") as ServerResponse["writeHead"],
  flushHeaders: shared("flushHeaders") as ServerResponse["flushHeaders"],
  write: shared("write") as ServerResponse["write"],
  end: shared("end") as ServerResponse["end"],
  destroy: shared("destroy") as ServerResponse["destroy"],
};

/**
 * Puts `watch` in charge of `res`'s methods, and gives what they were (to put back) and how to
 * call them (to pass a call on). The methods are the same functions on every watched response,
 * finding their watch on it: a function made per answer and stored on the response costs V8 far
 * more than the watch's own work (measured over HTTP: about 30 µs a request for one such
 * function, none for a shared one). writeHeader is Node's old name for writeHead, its own
 * reference to the unwatched one: a head written through it would leave before the decision.
 */
export function takeMethods(res: ServerResponse, watch: Watcher): Taken {
  const watched = res as Watched;
  const previous = watched[WATCH];
  const original: Original = {
    writeHead: watched.writeHead,
    writeHeader: watched.writeHeader,
    flushHeaders: watched.flushHeaders,
    write: watched.write,
    end: watched.end,
    destroy: watched.destroy,
  };
  watched[WATCH] = watch;
  const methods = res as unknown as Record<keyof Original, unknown>;
  methods.writeHead = SHARED.writeHead;
  methods.writeHeader = SHARED.writeHead;
  methods.flushHeaders = SHARED.flushHeaders;
  methods.write = SHARED.write;
  methods.end = SHARED.end;
  methods.destroy = SHARED.destroy;
  return { original, next: previous === undefined ? original : callingPrevious(original, previous), previous };
}

/** What {@link takeMethods} took: the methods to put back, how to pass a call on, the watch before. */
export interface Taken {
  original: Original;
  next: Original;
  previous: Watcher | undefined;
}

/**
 * Gives `res` back the methods it had, and its previous watch, if any, back its place. A
 * reference to a shared method kept meanwhile still finds a watch: this one, which once ended
 * passes every call on.
 */
export function giveBackMethods(res: ServerResponse, { original, previous }: Taken): void {
  Object.assign(res, original);
  if (previous !== undefined) (res as Watched)[WATCH] = previous;
}

/**
 * A second watch of the same response finds the first one's shared methods in place, which would
 * find the second and call it again: it passes its calls on to the first one directly.
 */
function callingPrevious(original: Original, previous: Watcher): Original {
  const next = { ...original } as unknown as Record<string, unknown>;
  const on = (name: Watchable) =>
    function previousWatch(this: ServerResponse, ...args: Args) {
      return CALLS[name](previous, this, args);
    };
  for (const name of Object.keys(CALLS) as Watchable[]) if (next[name] === SHARED[name]) next[name] = on(name);
  if (original.writeHeader === SHARED.writeHead) next.writeHeader = next.writeHead;
  return next as unknown as Original;
}
