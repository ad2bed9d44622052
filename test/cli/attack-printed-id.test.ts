import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { printable, printableId, readBack } from "../../src/cli/terminal-text.js";

// Attack on the ids the inbox command prints and reads back (`list` prints printableId(id); `show`,
// `replay` and `purge` read a typed id back first): over ids made of backslashes, `x`, `u`, hex
// digits, controls, bidi marks and lone surrogates, what must hold: the printed form holds no
// control, reads back to exactly the id, and no two ids print alike.

const pieces = fc.constantFrom(
  "\\",
  "\\\\",
  "x",
  "u",
  "1b",
  "9b",
  "202e",
  "00",
  "a",
  "\x1b",
  "\x9b",
  "\x7f",
  "\u202e",
  "\u200f",
  "\u061c",
  "\ud800",
  "\udfff",
  "\u{1f600}",
  "\n",
  "\\x1b",
  "\\u202e",
  "\\x",
);
const ids = fc.array(pieces, { maxLength: 8 }).map((parts) => parts.join(""));

describe("the inbox command's printed ids", () => {
  it("each reads back to exactly the id, holds no control, and no two ids print alike", () => {
    const printedBy = new Map<string, string>();
    fc.assert(
      fc.property(ids, (id) => {
        const printed = printableId(id);
        expect(printable(printed)).toBe(printed);
        expect(readBack(printed)).toBe(id);
        const other = printedBy.get(printed);
        if (other !== undefined) expect(other).toBe(id);
        printedBy.set(printed, id);
      }),
      { numRuns: 20_000 },
    );
  });
});
