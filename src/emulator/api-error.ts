/**
 * An error the emulated API answers with `{ "error": { "code", "message" } }` (spec section 7):
 * sendError() tells it apart with instanceof and answers its status, code, message and headers.
 */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}
