// The methods of a watched response. They are the same functions on every watched response, and
// find the watch the response carries: a function made per answer and stored on a ServerResponse
// costs V8 far more than the watch's own work (measured over HTTP with memory dedupe: one such
// function on writeHead took the receiver from 1.00× to 0.80× of the CPU per request without
// dedupe; a shared one costs nothing measurable).
import type { ServerResponse } from "node:http";

type Args = unknown[];

/**
 * The methods that change the head, and the verb of Node's refusal once it is sent. `setHeaders`
 * is one of them although it calls `setHeader`: Node's refuses before reading its argument (an
 * empty or invalid one too). They are watched only once a 2xx is held: until then Node's own
 * serve, and most answers (all those the receiver decides at once) are never held.
 */
const HEADER_METHODS = [
  ["setHeader", "set"],
  ["setHeaders", "set"],
  ["appendHeader", "append"],
  ["removeHeader", "remove"],
] as const;
export type HeaderMethod = (typeof HEADER_METHODS)[number][0];

/** What answers for a watched response's methods (the answer's watch). */
export interface Watcher {
  writeHead(res: ServerResponse, args: Args): ServerResponse;
  flushHeaders(res: ServerResponse): void;
  write(res: ServerResponse, args: Args): boolean;
  end(res: ServerResponse, args: Args): ServerResponse;
  destroy(res: ServerResponse, error?: Error): ServerResponse;
  /** A change to the head through `method` (refused with `verb` while a head is held). */
  header(res: ServerResponse, method: HeaderMethod, verb: string, args: Args): unknown;
}

type Call = (watch: Watcher, res: ServerResponse, args: Args) => unknown;

/** What each watched method does, given the watch that answers for it. */
const CALLS: Record<string, Call> = {
  writeHead: (watch, res, args) => watch.writeHead(res, args),
  flushHeaders: (watch, res) => watch.flushHeaders(res),
  write: (watch, res, args) => watch.write(res, args),
  end: (watch, res, args) => watch.end(res, args),
  destroy: (watch, res, args) => watch.destroy(res, args[0] as Error | undefined),
  ...Object.fromEntries(
    HEADER_METHODS.map(([method, verb]): [string, Call] => [
      method,
      (watch, res, args) => watch.header(res, method, verb, args),
    ]),
  ),
};

/** The watch a watched response carries, for the shared methods to find. */
const WATCH = Symbol("flag-webhooks.answer-watch");
type Watched = ServerResponse & { [WATCH]?: Watcher };
type Methods = Record<string, unknown>;

/** Method `name` of every watched response: its watch's, or Node's own on a response without one. */
function shared(name: string) {
  const call = CALLS[name] as Call;
  return function watched(this: Watched, ...args: Args): unknown {
    const watch = this[WATCH];
    if (watch === undefined) return (Object.getPrototypeOf(this)[name] as (...args: Args) => unknown).apply(this, args);
    return call(watch, this, args);
  };
}

const SHARED: Methods = Object.fromEntries(Object.keys(CALLS).map((name) => [name, shared(name)]));

/** Methods taken from a response: to put back, and to pass a call on to. */
export interface Taken {
  original: Methods;
  next: Methods;
}

/** The methods watched from the start: every way an answer begins, ends or is cut. */
const ANSWER_METHODS = ["writeHead", "flushHeaders", "write", "end", "destroy"];
const HEAD_METHODS = HEADER_METHODS.map(([method]) => method);

/**
 * Puts `watch` in charge of how `res`'s answer begins, ends or is cut. writeHeader is Node's old
 * name for writeHead (deprecated in its docs, still there), its own reference to the unwatched
 * one: a head written through it would leave before the decision, so it is taken too.
 * @returns what the methods were, and the watch that answered for `res` before, if any.
 */
export function takeAnswer(res: ServerResponse, watch: Watcher): Taken & { previous: Watcher | undefined } {
  const watched = res as Watched;
  const previous = watched[WATCH];
  watched[WATCH] = watch;
  const taken = take(res, [...ANSWER_METHODS, "writeHeader"], previous);
  (res as unknown as Methods).writeHeader = SHARED.writeHead;
  if (taken.next.writeHeader === SHARED.writeHead) taken.next.writeHeader = taken.next.writeHead;
  return { ...taken, previous };
}

/** Puts the watch `res` carries in charge of the methods that change its head (a 2xx is held). */
export function takeHead(res: ServerResponse, previous: Watcher | undefined): Taken {
  return take(res, HEAD_METHODS, previous);
}

/** Gives `res` back the methods taken, and its previous watch, if any, back its place. */
export function giveBack(res: ServerResponse, taken: Taken, previous: Watcher | undefined): void {
  Object.assign(res, taken.original);
  // A reference to a shared method kept meanwhile still finds a watch: this one (which, ended,
  // passes every call on), or the one before, again in charge.
  if (previous !== undefined) (res as Watched)[WATCH] = previous;
}

function take(res: ServerResponse, names: string[], previous: Watcher | undefined): Taken {
  const methods = res as unknown as Methods;
  const original: Methods = {};
  for (const name of names) {
    original[name] = methods[name];
    if (name in SHARED) methods[name] = SHARED[name];
  }
  return { original, next: previous === undefined ? original : callingPrevious(original, previous) };
}

/**
 * A second watch of the same response finds the first one's shared methods in place, which would
 * find the second and call it again: it passes its calls on to the first one directly.
 */
function callingPrevious(original: Methods, previous: Watcher): Methods {
  const next: Methods = { ...original };
  for (const [name, method] of Object.entries(original)) {
    if (method !== SHARED[name]) continue;
    const call = CALLS[name] as Call;
    next[name] = function previousWatch(this: ServerResponse, ...args: Args) {
      return call(previous, this, args);
    };
  }
  return next;
}
