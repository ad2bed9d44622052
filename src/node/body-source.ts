import type { IncomingMessage } from "node:http";
import { bodyAlreadyParsed } from "../errors.js";
import type { Payload } from "../payload.js";
import { readBody } from "./read-body.js";

/**
 * Where the raw body of a Node request is, shared by the Node adapters: raw bytes a framework or
 * body parser kept (`rawBody`, or a Buffer body from express.raw()), else the request stream. A
 * stream something else already read is a configuration error, reported as body_already_parsed
 * with the adapter's own `fix`, instead of waiting for data that will never come.
 */
export function nodeBody(
  req: IncomingMessage,
  raw: unknown,
  where: string,
  fix: string,
): (limit: number, timeout: number) => Payload | Promise<Payload> {
  return (limit, timeout) => {
    if (raw instanceof Uint8Array || typeof raw === "string") return raw;
    if (req.readableEnded) throw bodyAlreadyParsed(where, fix);
    return readBody(req, limit, timeout);
  };
}
