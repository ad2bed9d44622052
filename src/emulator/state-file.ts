// The emulator's state file: projects, flags, webhooks (their secrets included), the token and
// the delivery history, kept across restarts. Read once at start; written soon after each change.
import { randomBytes } from "node:crypto";
import {
  closeSync,
  constants,
  fchmodSync,
  fsyncSync,
  openSync,
  readFileSync,
  renameSync,
  statSync,
  unlinkSync,
  writeSync,
} from "node:fs";
import { basename, dirname, join } from "node:path";
import type { Delivery } from "./deliveries.js";
import type { StoredFlag, StoredWebhook } from "./store.js";

/** What the state file holds. */
export interface SavedState {
  version: 1;
  token: string;
  seq: number;
  projects: { id: string; flags: StoredFlag[]; webhooks: StoredWebhook[] }[];
  deliveries: Delivery[];
}

/** At most one state file write per this many milliseconds: a burst of changes is one write. */
const SAVE_INTERVAL_MS = 100;

/**
 * Reads the state file: undefined when there is none yet in a folder that exists (the first
 * start). Any other problem is a TypeError naming the option and saying why. `isToken` checks
 * the token it holds as the `token` option is checked.
 */
export function readStateFile(file: unknown, isToken: (token: string) => boolean): SavedState | undefined {
  const problem = (why: string, cause?: unknown) =>
    new TypeError(`flag-webhooks/emulator: option "stateFile": cannot read the state file ${file}: ${why}`, {
      cause,
    });
  if (typeof file !== "string" || file === "") throw problem("it must be a file path");
  let text: string;
  try {
    text = readFileSync(file).toString();
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT") {
      let folder: ReturnType<typeof statSync> | undefined;
      try {
        folder = statSync(dirname(file));
      } catch {
        // folder stays undefined: a folder that cannot be read is answered as missing, below.
      }
      if (!folder?.isDirectory()) throw problem(`its folder ${dirname(file)} does not exist`);
      return undefined;
    }
    if (code === "EISDIR") throw problem("it is a directory");
    if (code === "EACCES") throw problem("permission denied");
    throw problem(code ?? String(error), error);
  }
  let saved: SavedState;
  try {
    saved = JSON.parse(text) as SavedState;
  } catch (error) {
    throw problem(`it is not JSON (${error instanceof Error ? error.message : String(error)})`, error);
  }
  if (saved?.version !== 1 || !Array.isArray(saved.projects) || !Array.isArray(saved.deliveries)) {
    throw problem("it is not a state file of this version of the emulator");
  }
  if (typeof saved.token !== "string" || !isToken(saved.token)) throw problem("its token is not valid");
  return saved;
}

/**
 * Writes the state file soon after each change: after this tick, and at most once per
 * SAVE_INTERVAL_MS, so a burst of changes is one write. The history is bounded (maxDeliveries),
 * so a write is too.
 */
export class StateFile {
  private scheduled: NodeJS.Timeout | undefined;
  private lastSave = 0;
  private stopped = false;

  constructor(
    readonly file: string,
    private readonly state: () => SavedState,
  ) {}

  /** Schedules a write; a write already scheduled takes this change too. */
  save(): void {
    if (this.scheduled || this.stopped) return;
    const wait = Math.max(0, this.lastSave + SAVE_INTERVAL_MS - performance.now());
    // A full disk must not stop the emulator; the next change tries again.
    this.scheduled = setTimeout(() => this.flushOrWarn(), wait);
  }

  /** Writes now; a failure is a process warning, not an error. */
  flushOrWarn(): void {
    try {
      this.flush();
    } catch (error) {
      process.emitWarning(`flag-webhooks/emulator: could not save ${this.file}: ${String(error)}`);
    }
  }

  /** Writes now (throws what the write throws), in place of any write scheduled. */
  flush(): void {
    clearTimeout(this.scheduled);
    this.scheduled = undefined;
    this.lastSave = performance.now();
    writeAtomically(this.file, JSON.stringify(this.state()));
  }

  /** No write after this one, scheduled or asked for. */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.scheduled);
  }
}

/**
 * Writes a file that holds secrets: to a fresh name in its folder, created exclusively (O_EXCL
 * does not follow a link planted there) with mode 0600, synced, then renamed over the file (a
 * rename replaces a link at the path, never writes through it). So every write leaves the file
 * 0600 and whole, and no planted link makes it write elsewhere. O_NOFOLLOW is a second guard
 * where the platform has it (where it has not, the constant is undefined, which `|` reads as 0).
 */
function writeAtomically(file: string, text: string): void {
  const temp = join(dirname(file), `.${basename(file)}.${randomBytes(6).toString("hex")}.tmp`);
  const fd = openSync(temp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
  try {
    try {
      fchmodSync(fd, 0o600); // the umask may not widen it, and must not narrow it either
      const bytes = Buffer.from(text);
      for (let offset = 0; offset < bytes.byteLength; ) offset += writeSync(fd, bytes, offset);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(temp, file);
  } catch (error) {
    try {
      unlinkSync(temp);
    } catch {
      // Already renamed or gone.
    }
    throw error;
  }
}
