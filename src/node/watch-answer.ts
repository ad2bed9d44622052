import type { ServerResponse } from "node:http";
import { isSuccess } from "../receiver/answers.js";
import type { Accepted, Answer } from "../receiver/protocol.js";
import { isThenable } from "../util/thenable.js";
import { HeldWrites, tooLarge } from "./held-writes.js";
import { callbackOf, checkChunk, checkEnd, checkReason, endAfterEnd, headersSent, writeAfterEnd } from "./refusals.js";
import {
  giveBack,
  type HeaderMethod,
  passOn,
  type Taken,
  takeAnswer,
  takeHead,
  type Watcher,
} from "./watched-methods.js";

type Args = unknown[];
/**
 * The event a response emits when a held answer is ended: it reads as sent from then on, but
 * Node's "finish" comes only once the answer is released, after the handler has finished. A
 * framework whose handlers wait for their answer to be sent (a Fastify reply they return) waits
 * for this instead, or it would wait for ever.
 */
export const HELD_END = Symbol.for("flag-webhooks.held-end");

/**
 * Watches the answer Node sends on `res` for one accepted delivery, whoever writes it (the core,
 * the handler, the framework's error handler) and whenever (after the middleware returned: Koa,
 * a hijacked Fastify reply), and tells the receiver its status once it is final: when `end()` is
 * called, when the answer is cut with `res.destroy()`, or when the connection closes after the
 * answer began. A client that hangs up before anything was written changes nothing but the
 * delivery's record: the handler still works, and its claim must stand until it answers.
 *
 * While the delivery holds a claim, or a store that holds its effects, a 2xx answer is held back
 * (its head, writes and end kept in memory, the response looking sent to the code that wrote it)
 * until the receiver has decided and the store has recorded the event; then it is written as it
 * was, or replaced by the answer the receiver gives instead (a 503 when the commit failed, the
 * error's answer when the handler threw after it). Meanwhile the response reads as Node's reads
 * once sent: a change to its head throws, `end()` again does nothing, a write after `end()` is
 * refused (so the bytes that leave are the ones Node would have sent). Any other answer leaves at once.
 *
 * @param endsHandler whether the answer is also the only sign the handler finished (Express's
 *   route after the middleware), rather than something the adapter reports itself.
 * @returns false, watching nothing, when the answer has already ended (a handler that answered
 *   before a store enlisted): it left without waiting, and no later call on `res` would report it.
 */
export function watchAnswer(res: ServerResponse, accepted: Accepted, endsHandler: boolean): boolean {
  if (res.writableEnded || res.destroyed) return false;
  new AnswerWatch(res, accepted, endsHandler);
  return true;
}

/**
 * Whether Node cut `socket` for idling past its timeout (`res.setTimeout`, `server.timeout`)
 * while `res` was its answer. Marked by one listener per connection, not one per answer: a
 * keep-alive connection carries many.
 */
const IDLE = Symbol("flag-webhooks.idle");
type Marked = NonNullable<ServerResponse["socket"]> & { [IDLE]?: ServerResponse | null };

function markIdle(socket: ServerResponse["socket"]): void {
  const marked = socket as Marked | null;
  if (!marked || marked[IDLE] !== undefined) return;
  marked[IDLE] = null;
  marked.on("timeout", () => {
    marked[IDLE] = (marked as { _httpMessage?: ServerResponse | null })._httpMessage ?? null;
  });
}

class AnswerWatch implements Watcher {
  readonly #res: ServerResponse;
  readonly #accepted: Accepted;
  readonly #endsHandler: boolean;
  /** The methods the watch took from the response, to put back and to pass calls on to. */
  readonly #taken: Taken;
  /** The head's methods as they were before a hold began, to put back: none until then. */
  #headers: Taken | undefined;
  /** The status of the head, once fixed (written, or held). */
  #fixed: number | undefined;
  /** A 2xx answer is being held. */
  #holding = false;
  #head: Args | undefined;
  /** The held body: none until a hold begins. */
  #held: HeldWrites | undefined;
  /** The answer was reported to the receiver. */
  #over = false;
  /** The held answer was written (or replaced): Node has the response again. */
  #released = false;
  /** The connection, kept: Node detaches it from the response before "close". */
  readonly #socket: ServerResponse["socket"];

  constructor(res: ServerResponse, accepted: Accepted, endsHandler: boolean) {
    this.#res = res;
    this.#accepted = accepted;
    this.#endsHandler = endsHandler;
    this.#socket = res.socket;
    this.#taken = takeAnswer(res, this);
    markIdle(this.#socket);
  }

  writeHead(res: ServerResponse, args: Args): ServerResponse {
    // Stryker disable next-line ConditionalExpression: equivalent: after the release only a reference kept past it calls this, and the next line refuses it as Node's writeHead would
    if (this.#released) return passOn(res, this.#taken, "writeHead", args) as ServerResponse;
    if (this.#holding) throw headersSent("write");
    // Node reads the status as a number (`statusCode |= 0`): "200" or 200.5 is a 200, held as one.
    const status = (args[0] as number) | 0;
    if (!this.#over && this.#fixed === undefined && this.#holds(status)) {
      // A head Node refuses throws before anything is held, as Node throws before it writes: its
      // headers go through Node's own setHeader now, as Node's writeHead sets them, and the head
      // held is the status and reason.
      const [, reason, headers] = typeof args[1] === "string" ? args : [args[0], undefined, args[1]];
      // With no reason given, Node's writeHead checks the one set before (res.statusMessage).
      checkReason(reason ?? res.statusMessage);
      if (headers && typeof headers === "object" && !Array.isArray(headers)) {
        for (const [name, value] of Object.entries(headers)) res.setHeader(name, value as string);
        // Stryker disable next-line ConditionalExpression: equivalent: Node's writeHead(status, undefined) is writeHead(status)
        this.#head = reason === undefined ? [status] : [status, reason];
      } else {
        this.#head = args;
      }
      this.#hold(status);
      // As Node's writeHead does: the code that wrote it reads the status it wrote, as Node's number.
      res.statusCode = status;
      return res;
    }
    const result = passOn(res, this.#taken, "writeHead", args) as ServerResponse;
    // Stryker disable next-line AssignmentOperator: equivalent: once Node's head is written, headersSent already says no hold begins
    this.#fixed ??= res.statusCode;
    return result;
  }

  /**
   * Node's flushHeaders writes the head when none is written (through writeHead, so a 2xx is held
   * there), then sends what is buffered. A held head is written for the code that wrote it, and
   * leaves with the answer: there is nothing to flush, as there is not once Node's head is sent.
   */
  flushHeaders(res: ServerResponse): void {
    if (this.#holding && !this.#released) return;
    // Stryker disable next-line ArrayDeclaration: equivalent: Node's flushHeaders takes no argument
    passOn(res, this.#taken, "flushHeaders", []);
  }

  /** A change to the head: refused once a held answer's head is fixed, as Node refuses it once sent. */
  header(res: ServerResponse, method: HeaderMethod, verb: string, args: Args): unknown {
    // Stryker disable next-line ConditionalExpression,LogicalOperator: equivalent: the head's methods are taken only when a hold begins and given back at its release; after it, only a kept reference calls this, and Node's own method refuses as well
    if (this.#holding && !this.#released) throw headersSent(verb);
    // Only a taken-over header method calls this, and taking them over set #headers.
    return passOn(res, this.#headers as Taken, method, args);
  }

  write(res: ServerResponse, args: Args): boolean {
    if (this.#released) return passOn(res, this.#taken, "write", args) as boolean;
    if (this.#holding && this.#over) {
      // As Node's write: a chunk it refuses throws even after end, before the end is looked at.
      checkChunk(args[0]);
      return writeAfterEnd(res, args);
    }
    const begins = !this.#holding && this.#begins();
    if (!this.#holding && !begins) return passOn(res, this.#taken, "write", args) as boolean;
    // A chunk Node refuses throws before anything is held, as Node throws before it writes.
    checkChunk(args[0]);
    if (begins) this.#holdImplicit(res);
    const held = this.#held as HeldWrites;
    if (!held.fits(args)) return this.#tooLarge(res, args);
    return held.add(args);
  }

  /** A held body past its bound: the writer gets the error, and the answer is cut (not handled). */
  #tooLarge(res: ServerResponse, args: Args): false {
    const error = tooLarge();
    const callback = callbackOf(args) as ((error: Error) => void) | undefined;
    queueMicrotask(() => callback?.(error));
    this.destroy(res, error);
    return false;
  }

  end(res: ServerResponse, args: Args): ServerResponse {
    if (this.#holding && this.#over && !this.#released) return endAfterEnd(res, args);
    if (this.#over) return passOn(res, this.#taken, "end", args) as ServerResponse;
    if (!this.#holding && this.#begins()) {
      // The whole answer comes at once: the decision is asked for before any of it is held, and
      // when it waited for nothing (no store to commit, a claim marked done at once) the answer
      // leaves now, as it is or with the receiver's in its place, and is never held.
      checkEnd(args);
      checkReason(res.statusMessage);
      this.#over = true;
      this.#fixed = res.statusCode;
      const verdict = this.#report(this.#fixed);
      if (!isThenable(verdict)) {
        this.#release(args, verdict);
        return res;
      }
      this.#hold(this.#fixed);
      return this.#endHeld(res, args, verdict);
    }
    if (!this.#holding) {
      // An end that throws (a body Node refuses) sent nothing: the answer the error handler writes
      // next is the one that counts, so the watch stays until an end returns.
      const result = passOn(res, this.#taken, "end", args) as ServerResponse;
      this.#over = true;
      this.#restore();
      void this.#report(this.#fixed ?? res.statusCode);
      return result;
    }
    checkEnd(args);
    if (!(this.#held as HeldWrites).fits(args)) {
      this.#tooLarge(res, args);
      return res;
    }
    this.#over = true;
    return this.#endHeld(res, args, this.#report(this.#fixed));
  }

  /** Ends a held answer as Node would appear to, and writes it once the receiver has decided. */
  #endHeld(res: ServerResponse, args: Args, verdict: Answer | undefined | PromiseLike<Answer | undefined>) {
    looks(res, "writableEnded");
    res.emit(HELD_END);
    void Promise.resolve(verdict).then((instead) => this.#release(args, instead));
    return res;
  }

  destroy(res: ServerResponse, error?: Error): ServerResponse {
    if (!this.#over) {
      this.#over = true;
      this.#restore();
      void this.#report(undefined, error);
    }
    return passOn(res, this.#taken, "destroy", [error]) as ServerResponse;
  }

  /** Every event the response emits passes here while it is watched; its "close" is looked at first. */
  emit(res: ServerResponse, args: Args): boolean {
    if (args[0] === "close") this.#closed();
    return passOn(res, this.#taken, "emit", args) as boolean;
  }

  /**
   * The connection closed before the answer ended. Cut by the server's own code after the answer
   * began: that answer is cut, and the route finished with it. Closed by the client, or cut by
   * Node for idling past its timeout: the handler still works (a route writing a long answer goes
   * on), and its claim stands until it ends it; but a route may never answer a client that is
   * gone, so the delivery's record ends.
   */
  #closed(): void {
    if (this.#over) return;
    const began = this.#holding || this.#res.headersSent;
    if (!began || this.#clientLeft()) {
      if (this.#endsHandler) this.#accepted.clientClosed();
      return;
    }
    this.#over = true;
    this.#restore();
    void this.#report(undefined);
  }

  /**
   * Whether the connection closed while the handler may still work: the client closed it (it sent
   * its end, or reset it), or Node cut it for idling past its timeout (`res.setTimeout`,
   * `server.timeout`), which says nothing of the handler. Otherwise the server's own code cut it
   * (Express's final handler after the route failed), which destroys it without an error while the
   * client still listens.
   */
  #clientLeft(): boolean {
    const socket = this.#socket as Marked | null;
    return socket !== null && (socket[IDLE] === this.#res || socket.readableEnded || socket.errored !== null);
  }

  /** Whether a 2xx answer begins now, to be held: nothing written yet, and something to record. */
  #begins(): boolean {
    if (this.#res.headersSent || !this.#holds(this.#res.statusCode)) return false;
    // Stryker disable next-line ConditionalExpression,LogicalOperator: equivalent: an answer over or with its status fixed has its head sent, held or given back (the check above, or the callers', says no)
    return !this.#over && this.#fixed === undefined;
  }

  #holds(status: unknown): boolean {
    return isSuccess(status as number) && this.#accepted.holdsAnswer();
  }

  /** Holds the head Node would write on its own (`res.statusCode`, the headers set), as Node checks it. */
  #holdImplicit(res: ServerResponse): void {
    checkReason(res.statusMessage);
    this.#hold(res.statusCode);
  }

  #hold(status: number): void {
    this.#holding = true;
    this.#fixed = status;
    this.#headers ??= takeHead(this.#res, this.#taken);
    this.#held ??= new HeldWrites(this.#res);
    looks(this.#res, "headersSent");
  }

  #report(status: number | undefined, error?: unknown): Answer | undefined | Promise<Answer | undefined> {
    if (this.#endsHandler) this.#accepted.finished(error);
    return this.#accepted.answered(status);
  }

  #restore(): void {
    const res = this.#res;
    giveBack(res, this.#taken, this.#headers);
    // Only a held answer was made to read as sent (an answer decided at once never was).
    // Stryker disable next-line ConditionalExpression: equivalent: an answer never held has nothing below to undo (deleting an absent property does nothing)
    if (!this.#holding) return;
    // A drain due when the held writes are handed to Node still comes; a cut answer gets none.
    if (!this.#released) (this.#held as HeldWrites).stop();
    // In the reverse order of their making: an object losing any other property than its last
    // leaves V8's fast mode, and every later access to the response (Node's own) slows down.
    delete (res as { writableEnded?: boolean }).writableEnded;
    delete (res as { headersSent?: boolean }).headersSent;
  }

  /** Writes the held answer as it was, or the receiver's answer in its place. */
  #release(endArgs: Args, instead: Answer | undefined): void {
    const res = this.#res;
    this.#released = true;
    this.#restore();
    // Stryker disable next-line ConditionalExpression: equivalent: Node's response ignores a head, writes and an end once destroyed (the held callbacks were called already)
    if (res.destroyed) return;
    try {
      if (instead) {
        res.statusCode = instead.status;
        for (const name of res.getHeaderNames()) res.removeHeader(name);
        for (const [name, value] of Object.entries(instead.headers)) res.setHeader(name, value);
        // Stryker disable next-line ConditionalExpression,StringLiteral: equivalent: an answer given in place of a held 2xx never closes the connection (only refusals before a delivery is accepted do)
        if (instead.close) res.setHeader("connection", "close");
        res.end(instead.body ?? undefined);
        return;
      }
      if (this.#head) res.writeHead(...(this.#head as Parameters<ServerResponse["writeHead"]>));
      else res.statusCode = this.#fixed as number;
      const held = this.#held;
      if (held) for (const args of held.writes) (res.write as (...args: Args) => boolean)(...args);
      (res.end as (...args: Args) => ServerResponse)(...endArgs);
    } catch (error) {
      res.destroy(error as Error);
    }
  }
}

/** Makes `res` read as Node reads a response whose head (or end) went out, while it is held. */
function looks(res: ServerResponse, property: "headersSent" | "writableEnded"): void {
  Object.defineProperty(res, property, { configurable: true, get: yes });
}

/** One getter for every held response: a new one each time would give each response a shape of its own. */
function yes(): boolean {
  return true;
}
