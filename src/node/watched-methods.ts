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
const HEAD_METHODS = HEADER_METHODS.map(([method]) => method);

/** What answers for a watched response's methods (the answer's watch). */
export interface Watcher {
  writeHead(res: ServerResponse, args: Args): ServerResponse;
  flushHeaders(res: ServerResponse): void;
  write(res: ServerResponse, args: Args): boolean;
  end(res: ServerResponse, args: Args): ServerResponse;
  destroy(res: ServerResponse, error?: Error): ServerResponse;
  /** A change to the head through `method` (refused with `verb` while a head is held). */
  header(res: ServerResponse, method: HeaderMethod, verb: string, args: Args): unknown;
  /** An event the response emits ("close" tells the watch the connection closed). */
  emit(res: ServerResponse, args: Args): boolean;
}

type Call = (watch: Watcher, res: ServerResponse, args: Args) => unknown;

/** What each watched method does, given the watch that answers for it. */
const CALLS: Record<string, Call> = {
  writeHead: (watch, res, args) => watch.writeHead(res, args),
  // Node's old name for writeHead (deprecated in its docs, still there), its own reference to the
  // unwatched one: a head written through it would leave before the decision.
  writeHeader: (watch, res, args) => watch.writeHead(res, args),
  flushHeaders: (watch, res) => watch.flushHeaders(res),
  write: (watch, res, args) => watch.write(res, args),
  end: (watch, res, args) => watch.end(res, args),
  destroy: (watch, res, args) => watch.destroy(res, args[0] as Error | undefined),
  // The response's "close", seen as it is emitted: a listener added and taken off per answer
  // costs more (the response's table of listeners grows and shrinks for each delivery).
  emit: (watch, res, args) => watch.emit(res, args),
  ...Object.fromEntries(
    HEADER_METHODS.map(([method, verb]): [string, Call] => [
      method,
      (watch, res, args) => watch.header(res, method, verb, args),
    ]),
  ),
};

/**
 * The watches of a watched response, in the order they took it: one, but for two receivers on the
 * same route. Each took the methods with the functions of its place in this order, so a method
 * kept by a wrapper put between them (compression's, between two receivers) still reaches the
 * watch it was taken from, and the response's own methods the last one. The first is kept apart
 * from the others: it is all but always the only one, and needs no list made for it.
 */
const FIRST = Symbol("flag-webhooks.answer-watch");
const MORE = Symbol("flag-webhooks.answer-watches");
type Watched = ServerResponse & { [FIRST]?: Watcher; [MORE]?: Watcher[] };
type Methods = Record<string, unknown>;

/** The watch at `depth` on `res`. */
function watchAt(res: Watched, depth: number): Watcher {
  return (depth === 0 ? res[FIRST] : (res[MORE] as Watcher[])[depth - 1]) as Watcher;
}

/** Method `name` of the watch at `depth` on every watched response. */
function shared(name: string, depth: number) {
  const call = CALLS[name] as Call;
  return function watched(this: Watched, ...args: Args): unknown {
    return call(watchAt(this, depth), this, args);
  };
}

/** The watched methods of each depth, made once for every response: the first is all but always the only one. */
const SHARED: Methods[] = [];

function sharedAt(depth: number): Methods {
  SHARED[depth] ??= Object.fromEntries(Object.keys(CALLS).map((name) => [name, shared(name, depth)]));
  return SHARED[depth];
}

/**
 * The methods a watch took from a response, each by its name, to put back and to pass calls on
 * to, and the watched ones that replaced them (`shared`). One object per taking, and no more.
 */
export type Taken = Methods & { readonly shared: Methods };

/** Puts `watch` in charge of how `res`'s answer begins, ends or is cut. */
export function takeAnswer(res: ServerResponse, watch: Watcher): Taken {
  const watched = res as Watched;
  let depth = 0;
  // Stryker disable next-line ConditionalExpression,EqualityOperator: equivalent: a first watch put in the list instead takes the functions of depth 1, which find it there (only the list's cost differs)
  if (watched[FIRST] === undefined) {
    watched[FIRST] = watch;
  } else {
    // Stryker disable next-line ArrayDeclaration: equivalent: a watch's depth is the list's length after its push, which finds it whatever the list held before
    watched[MORE] ??= [];
    depth = watched[MORE].push(watch);
  }
  const methods = res as unknown as Methods;
  // Each method by its name, not looped over a list of names: a store under a varying key on a
  // ServerResponse costs V8 more than the rest of the watch (about 2 µs a delivery, profiled).
  const taken: Taken = {
    writeHead: methods.writeHead,
    writeHeader: methods.writeHeader,
    flushHeaders: methods.flushHeaders,
    write: methods.write,
    end: methods.end,
    destroy: methods.destroy,
    emit: methods.emit,
    shared: sharedAt(depth),
  };
  putAnswer(res, taken.shared);
  return taken;
}

/** Puts `methods`' answer methods on `res`, each by its name. */
function putAnswer(res: ServerResponse, methods: Methods): void {
  const target = res as unknown as Methods;
  target.writeHead = methods.writeHead;
  target.writeHeader = methods.writeHeader;
  target.flushHeaders = methods.flushHeaders;
  target.write = methods.write;
  target.end = methods.end;
  target.destroy = methods.destroy;
  target.emit = methods.emit;
}

/** Puts the same watch in charge of the methods that change `res`'s head (a 2xx is held). */
export function takeHead(res: ServerResponse, answer: Taken): Taken {
  const methods = res as unknown as Methods;
  // Stryker disable next-line ObjectLiteral: equivalent: the head's taken methods are read by name only (giveBack, passOn), never its `shared`
  const taken: Taken = { shared: answer.shared };
  for (const name of HEAD_METHODS) {
    taken[name] = methods[name];
    methods[name] = answer.shared[name];
  }
  return taken;
}

/**
 * Gives `res` back the answer's methods, and the head's if they were taken. A reference to a
 * watched method kept meanwhile still reaches its watch, which once ended passes every call on.
 */
export function giveBack(res: ServerResponse, answer: Taken, head: Taken | undefined): void {
  putAnswer(res, answer);
  if (!head) return;
  const methods = res as unknown as Methods;
  for (const name of HEAD_METHODS) methods[name] = head[name];
}

/** Calls the method `name` that was there before the watch took it. */
export function passOn(res: ServerResponse, taken: Taken, name: string, args: Args): unknown {
  return (taken[name] as (...args: Args) => unknown).apply(res, args);
}
