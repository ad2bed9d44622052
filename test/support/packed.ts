import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";

/** The repository's root. */
export const root = resolve(import.meta.dirname, "../..");

/**
 * A user's project with the packed package installed, as `npm install` of the tarball leaves it:
 * `npm pack` of the repository (dist must be built: `npm test` builds it first), extracted into
 * `node_modules/flag-webhooks` of a new temporary folder. The packages the project itself brings
 * (a framework, a database client) are linked from the repository's own node_modules by
 * {@link PackedProject.link}, so nothing is fetched.
 */
export interface PackedProject {
  dir: string;
  /** The installed package: `<dir>/node_modules/flag-webhooks`. */
  installed: string;
  /** The tarball's size in bytes, and the number of files in it. */
  tarball: { bytes: number; files: number };
  /** Links packages (`express`, `@aws-sdk/client-dynamodb`) from the repository into the project. */
  link(...names: string[]): void;
  /** Writes a file of the project (folders made as needed) and returns its path. */
  write(path: string, text: string): string;
  /** Removes the project. */
  remove(): void;
}

/**
 * Packs the repository (`npm pack`; dist must be built) and extracts the tarball into
 * `<dir>/node_modules/flag-webhooks`, as `npm install` of it leaves it: the installed folder,
 * and the tarball's size in bytes and number of files.
 */
export function installPacked(dir: string): { installed: string; tarball: PackedProject["tarball"] } {
  if (!existsSync(join(root, "dist/index.cjs"))) throw new Error("dist is not built: run npm run build first");
  const scratch = mkdtempSync(join(tmpdir(), "flag-webhooks-pack-"));
  try {
    // --ignore-scripts: prepack would rebuild dist under the other test files that read it.
    execFileSync("npm", ["pack", "--silent", "--ignore-scripts", "--pack-destination", scratch], {
      cwd: root,
      stdio: "pipe",
    });
    const tarball = readdirSync(scratch).find((file) => file.endsWith(".tgz"));
    if (!tarball) throw new Error("npm pack made no tarball");
    const installed = join(dir, "node_modules/flag-webhooks");
    mkdirSync(installed, { recursive: true });
    execFileSync("tar", ["-xzf", join(scratch, tarball), "-C", installed, "--strip-components=1"]);
    const files = execFileSync("tar", ["-tzf", join(scratch, tarball)], { encoding: "utf8" })
      .trim()
      .split("\n").length;
    return { installed, tarball: { bytes: statSync(join(scratch, tarball)).size, files } };
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

/** Packs the repository and installs the tarball into a new project of this `type`. */
export function packedProject(type: "module" | "commonjs" = "module"): PackedProject {
  const dir = mkdtempSync(join(tmpdir(), "flag-webhooks-user-"));
  const { installed, tarball } = installPacked(dir);
  writeFileSync(
    join(dir, "package.json"),
    `${JSON.stringify({ name: "user-project", private: true, type }, null, 2)}\n`,
  );
  return {
    dir,
    installed,
    tarball,
    link(...names) {
      for (const name of names) {
        const target = join(dir, "node_modules", name);
        if (existsSync(target)) continue;
        mkdirSync(dirname(target), { recursive: true });
        symlinkSync(join(root, "node_modules", name), target, "dir");
      }
    },
    write(path, text) {
      const file = join(dir, path);
      mkdirSync(dirname(file), { recursive: true });
      writeFileSync(file, text);
      return file;
    },
    remove() {
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
