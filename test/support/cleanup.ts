import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach } from "vitest";

/** Something to undo after a test: a server to close, a folder to remove, an emulator to stop. */
export type Task = () => unknown;

/**
 * Registers, in the calling test file, an afterEach that runs what each test asked to undo, the
 * last first; returns the function a test asks with.
 *
 * @example
 * const cleanup = cleanupAfterEach();
 * it("...", async () => { const emulator = await createEmulator(); cleanup(() => emulator.close()); });
 */
export function cleanupAfterEach(): (task: Task) => void {
  const tasks: Task[] = [];
  afterEach(async () => {
    for (const task of tasks.splice(0).reverse()) await task();
  });
  return (task) => void tasks.push(task);
}

/** A new, empty temporary folder, removed by `cleanup` (from {@link cleanupAfterEach}) after the test. */
export function tempDir(cleanup: (task: Task) => void, prefix = "flag-webhooks-test-"): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  cleanup(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}
