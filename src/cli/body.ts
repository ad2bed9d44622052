import { readFile } from "node:fs/promises";
import { CommandError } from "./command.js";

/** A body read from a file or stdin, with a name for messages. */
export interface Body {
  bytes: Uint8Array<ArrayBuffer>;
  /** The file name, or "stdin". */
  source: string;
}

const REASONS: Record<string, string> = {
  ENOENT: "no such file",
  EACCES: "permission denied",
  EPERM: "permission denied",
  EISDIR: "it is a directory",
  ENOTDIR: "a part of the path is not a directory",
  ENAMETOOLONG: "the name is too long",
};

/**
 * The exact bytes of `path`, or of stdin when `path` is `"-"` or absent. Bytes, not text, because
 * the signature covers bytes: a trailing newline or a byte-order mark counts.
 */
export async function readBody(
  path: string | undefined,
  stdin: NodeJS.ReadableStream,
  stderr: NodeJS.WritableStream,
): Promise<Body> {
  if (path === undefined || path === "-") {
    if ((stdin as { isTTY?: boolean }).isTTY) stderr.write("Reading the body from stdin; end it with Ctrl-D.\n");
    return { bytes: await readStream(stdin), source: "stdin" };
  }
  try {
    return { bytes: await readFile(path), source: path };
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? "";
    throw new CommandError(`cannot read ${path}: ${REASONS[code] ?? (error as Error).message}`);
  }
}

async function readStream(stream: NodeJS.ReadableStream): Promise<Uint8Array<ArrayBuffer>> {
  const chunks: Buffer[] = [];
  try {
    for await (const chunk of stream) chunks.push(typeof chunk === "string" ? Buffer.from(chunk) : chunk);
  } catch (error) {
    throw new CommandError(`cannot read stdin: ${(error as Error).message}`);
  }
  return Buffer.concat(chunks);
}
