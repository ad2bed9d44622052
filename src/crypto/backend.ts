import type { Payload } from "../payload.js";

/**
 * HMAC-SHA256 as flag-webhooks needs it. Two implementations sit behind this interface:
 * `node:crypto` where the runtime has it, Web Crypto everywhere else.
 */
export interface HmacBackend {
  /** Lowercase hex HMAC-SHA256 of `payload` keyed with the UTF-8 bytes of `secret`. */
  sign(secret: string, payload: Payload): Promise<string>;
  /**
   * Which secret `signature` (already checked to be 64 lowercase hex characters) is the HMAC of
   * `payload` under, compared in constant time: 0 for a single secret or the first of a list, the
   * index in the list otherwise, -1 for none.
   */
  verify(secret: string | readonly string[], payload: Payload, signature: string): number | Promise<number>;
}
