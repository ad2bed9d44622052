/** An error the emulated API answers with `{ "error": { "code", "message" } }` (spec section 7). */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    // Stryker disable next-line StringLiteral: not observable: sendError() tells errors apart with instanceof and answers only code and message
    this.name = "ApiError";
  }
}
