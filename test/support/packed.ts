import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
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

/** Where {@link packedTarball} keeps the tarball it made, named by the content it packed. */
const packs = join(root, ".test-results/packed");

/**
 * The tarball `npm pack` makes of the repository as it is now (dist must be built): packed once
 * and kept in .test-results/packed under a hash of everything the package's `files` can take in,
 * so that the test files that install the package (six, each 2 s of npm's CPU to pack) share one
 * pack for as long as that content is the same. A change to any of those files (a new build of
 * dist, an edited page) makes a new hash, hence a new pack: a test never installs a stale package.
 */
export function packedTarball(): string {
  if (!existsSync(join(root, "dist/index.cjs"))) throw new Error("dist is not built: run npm run build first");
  const tarball = join(packs, `flag-webhooks-${packedContentHash()}.tgz`);
  if (existsSync(tarball)) return tarball;
  mkdirSync(packs, { recursive: true });
  const scratch = mkdtempSync(join(tmpdir(), "flag-webhooks-pack-"));
  try {
    // --ignore-scripts: prepack would rebuild dist under the other test files that read it.
    execFileSync("npm", ["pack", "--silent", "--ignore-scripts", "--pack-destination", scratch], {
      cwd: root,
      stdio: "pipe",
    });
    const made = readdirSync(scratch).find((file) => file.endsWith(".tgz"));
    if (!made) throw new Error("npm pack made no tarball");
    // Test files packing at the same moment each write their own copy, then rename it into place
    // (atomic): a reader sees one whole tarball or none. Older contents' tarballs go.
    const own = `${tarball}.${process.pid}`;
    copyFileSync(join(scratch, made), own);
    renameSync(own, tarball);
    for (const file of readdirSync(packs)) {
      if (file.endsWith(".tgz") && join(packs, file) !== tarball) rmSync(join(packs, file), { force: true });
    }
    return tarball;
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

/**
 * A hash of every file `npm pack` may take in: package.json, the README and LICENSE npm always
 * adds, and each path of `files` (its `!` exclusions hashed too: a superset only packs more often).
 */
function packedContentHash(): string {
  const manifest = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { files?: string[] };
  const hash = createHash("sha256");
  const add = (path: string) => {
    const full = join(root, path);
    if (!existsSync(full)) return;
    if (statSync(full).isDirectory()) {
      for (const name of readdirSync(full).sort()) add(join(path, name));
      return;
    }
    hash.update(`${path}\0${statSync(full).size}\0`);
    hash.update(readFileSync(full));
  };
  const always = readdirSync(root).filter((name) => /^(package\.json|readme|license|licence)/i.test(name));
  for (const path of [...always.sort(), ...(manifest.files ?? []).map((path) => path.replace(/^!/, ""))]) add(path);
  return hash.digest("hex").slice(0, 16);
}

/**
 * Extracts the packed tarball ({@link packedTarball}) into `<dir>/node_modules/flag-webhooks`, as
 * `npm install` of it leaves it: the installed folder, and the tarball's size in bytes and number
 * of files.
 */
export function installPacked(dir: string): { installed: string; tarball: PackedProject["tarball"] } {
  const tarball = packedTarball();
  const installed = join(dir, "node_modules/flag-webhooks");
  mkdirSync(installed, { recursive: true });
  execFileSync("tar", ["-xzf", tarball, "-C", installed, "--strip-components=1"]);
  const files = execFileSync("tar", ["-tzf", tarball], { encoding: "utf8" }).trim().split("\n").length;
  return { installed, tarball: { bytes: statSync(tarball).size, files } };
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
