import type { Payload } from "../payload.js";

/**
 * HMAC-SHA256 as flag-webhooks needs it. Two implementations sit behind this interface:
 * `node:crypto` where the runtime has it, Web Crypto everywhere else.
 */
export interface HmacBackend {
  /** Lowercase hex HMAC-SHA256 of `payload` keyed with the UTF-8 bytes of `secret`. */
  sign(secret: string, payload: Payload): Promise<string>;
  /**
   * Whether `signature` (already checked to be 64 lowercase hex characters) equals the HMAC of
   * `payload` under `secret` or any one of a list of secrets, compared in constant time.
   */
  verify(secret: string | readonly string[], payload: Payload, signature: string): boolean | Promise<boolean>;
}
