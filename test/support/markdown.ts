import { existsSync, readFileSync, statSync } from "node:fs";
import { dirname, relative, resolve } from "node:path";

/** A heading's anchor as GitHub makes it: the text lowercased, punctuation but '-' and '_' dropped, spaces to '-'. */
export function githubSlug(heading: string): string {
  return heading
    .replace(/\[([^\]]*)\]\([^)]*\)/g, "$1")
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\s_-]/gu, "")
    .replace(/ /g, "-");
}

/** The text outside fenced code blocks. */
export function prose(text: string): string {
  return text.replace(/^```[\s\S]*?^```/gm, "");
}

/** Every anchor a Markdown file offers: its headings' slugs, a repeated one suffixed -1, -2, … */
export function anchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const [, heading] of prose(text).matchAll(/^#{1,6} (.+)$/gm)) {
    const slug = githubSlug(heading ?? "");
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    out.add(n === 0 ? slug : `${slug}-${n}`);
  }
  return out;
}

/** Relative link and image targets of a Markdown text, outside code. */
export function relativeLinks(text: string): string[] {
  const outsideCode = prose(text).replace(/`[^`]*`/g, "");
  return [...outsideCode.matchAll(/\]\(([^)\s]+)\)/g)]
    .map(([, target]) => target as string)
    .filter((target) => !/^[a-z][a-z0-9+.-]*:/i.test(target));
}

/**
 * The relative links of the Markdown file at `path` (from `root`) that do not resolve: to a file
 * or folder inside `root` that exists, and for `#anchor`, to a heading of that Markdown file.
 */
export function brokenLinks(root: string, path: string): string[] {
  const text = readFileSync(resolve(root, path), "utf8");
  return relativeLinks(text).filter((link) => {
    const [file = "", anchor] = link.split("#");
    const target = file === "" ? resolve(root, path) : resolve(root, dirname(path), decodeURI(file));
    if (relative(root, target).startsWith("..") || !existsSync(target)) return true;
    if (anchor === undefined) return false;
    if (!target.endsWith(".md") || statSync(target).isDirectory()) return true;
    return !anchors(readFileSync(target, "utf8")).has(anchor);
  });
}
