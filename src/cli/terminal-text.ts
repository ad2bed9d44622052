// Text the command prints that came from a sender or a handler (ids, types, bodies, errors),
// made safe for a terminal, in the table and in --json alike: one rule for which characters a
// terminal acts on, and one way of writing them.

// The C0 controls, DEL, the C1 controls (U+009B is a terminal's CSI, as ESC [ is) and the marks
// that reorder the text around them (embeddings, overrides, isolates, and the left-to-right,
// right-to-left and Arabic letter marks): a terminal acts on them (clears the screen, sets the
// window's title, hides or reverses text) instead of showing them. And a lone surrogate, which a
// UTF-8 terminal would show as U+FFFD, a character that was not there.
const CONTROLS = /[\p{Cc}\p{Cs}\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/gu;

/**
 * `text` safe to print on a terminal: every control character written as its escape (`\x1b`,
 * `\u202e`), so a person sees what was there and the terminal acts on none of it.
 */
export function printable(text: string, keepNewlines = false): string {
  return text.replace(CONTROLS, (control) => {
    if (keepNewlines && control === "\n") return control;
    const code = control.charCodeAt(0);
    return code < 0x100 ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u${code.toString(16).padStart(4, "0")}`;
  });
}

/**
 * Whether an argument may be a connection string with a password (a postgres:// URL, SQLAlchemy's
 * postgresql+psycopg2://, JDBC, a URL pasted with a leading space, libpq's `host=… password=…`,
 * a bare `user:password`): a file path, an action or a command name seldom has any of these (a
 * colon only after a Windows drive letter), and a message is printed where others read it (a CI
 * log, a shared terminal).
 */
export function mayHoldSecret(typed: string): boolean {
  return /:\/\/|@|=/.test(typed) || typed.replace(/^[A-Za-z]:(?=[\\/])/, "").includes(":");
}

/**
 * An argument as typed, quoted for a message that names it ("unknown action"), or not shown at
 * all when it may be a connection string (a `--db` value typed where an action was expected).
 * Its controls are escaped where every message is written (printable()).
 */
export function echoed(typed: string): string {
  return mayHoldSecret(typed) ? "(not shown: it may hold a password)" : `"${typed}"`;
}

/**
 * `value` as indented JSON with no control a terminal acts on: JSON.stringify escapes only
 * U+0000–U+001F, so DEL, the C1 controls and the bidi marks are written as `\uXXXX` too. They can
 * only occur inside strings (JSON's own characters are ASCII), so it parses back to the same value.
 */
export function terminalJson(value: unknown): string {
  return JSON.stringify(value, null, 2).replace(CONTROLS, (control) =>
    control.length === 1 && control.charCodeAt(0) < 0x20
      ? control
      : `\\u${control.charCodeAt(0).toString(16).padStart(4, "0")}`,
  );
}

/**
 * An id as printed for a person to copy back: printable(), each backslash the id holds written
 * twice first, so that no two ids print alike (an id holding the four characters `\x1b` and one
 * holding ESC) and readBack() gives back exactly the id printed.
 */
export function printableId(id: string): string {
  return printable(id.replaceAll("\\", "\\\\"));
}

/**
 * `text` with the escapes printableId() writes (`\x1b`, `\u202e`, a backslash written twice) read
 * back into what they stand for, so that an id copied from the table names its event. Only escapes
 * of what printable() escapes are read back: any other `\x41` stays as typed.
 */
export function readBack(text: string): string {
  return text.replace(/\\\\|\\x([0-9a-f]{2})|\\u([0-9a-f]{4})/g, (written, byte?: string, unit?: string) => {
    if (written === "\\\\") return "\\";
    const control = String.fromCharCode(Number.parseInt((byte ?? unit) as string, 16));
    // printable() writes an escape only for a control, and each control one way.
    return printable(control) === written ? control : written;
  });
}
