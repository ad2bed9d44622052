// Shared helpers of the benchmark scripts: where the library is, the bodies, the reference
// ("physical limit") verifier, statistics and markdown tables. Plain ESM, Node >= 20, no build.
import { fork } from "node:child_process";
import { createHmac, timingSafeEqual } from "node:crypto";
import { cpus, release, type } from "node:os";
import { dirname, isAbsolute, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

export const BENCH_DIR = dirname(fileURLToPath(import.meta.url));

/** `BENCH_QUICK=1` (or any non-empty value but "0") selects the smoke-test budget. */
export const QUICK = Boolean(process.env.BENCH_QUICK) && process.env.BENCH_QUICK !== "0";

/**
 * The built library: `FLAG_WEBHOOKS_DIST` (absolute, or relative to the current directory), else
 * `../dist` next to bench/. Returned as an absolute directory path.
 */
export function distDir() {
  const fromEnv = process.env.FLAG_WEBHOOKS_DIST;
  if (fromEnv) return isAbsolute(fromEnv) ? fromEnv : resolve(process.cwd(), fromEnv);
  return resolve(BENCH_DIR, "../dist");
}

/** A file URL of one entry point of the built library, e.g. `distUrl("express.js")`. */
export function distUrl(file, dir = distDir()) {
  return pathToFileURL(resolve(dir, file)).href;
}

export const SECRET = "bench-s3cr3t-0123456789abcdef";

/** The `flag.updated` event every benchmark sends, before padding. */
export const EVENT_JSON =
  '{"id":"evt_1","type":"flag.updated","createdAt":"2026-11-21T09:30:00Z","environment":"production",' +
  '"data":{"flag":"new-checkout","changes":[{"path":"on","from":false,"to":true}],' +
  '"actor":{"type":"user","email":"dana@example.com"}}}';

/** A valid event padded with JSON whitespace (spaces) to exactly `size` bytes. */
export function paddedEvent(size) {
  const base = Buffer.from(EVENT_JSON, "utf8");
  if (size < base.length) throw new Error(`body size ${size} is smaller than the event (${base.length} B)`);
  const body = Buffer.alloc(size, 0x20);
  base.copy(body, 0);
  JSON.parse(body.toString("utf8")); // still valid JSON
  return body;
}

/** Lowercase hex HMAC-SHA256 of `body` under `secret` (UTF-8 key), computed directly. */
export function hexSignature(body, secret = SECRET) {
  return createHmac("sha256", secret).update(body).digest("hex");
}

const HEX64 = /^[0-9a-f]{64}$/;

/**
 * The physical limit on Node: one HMAC, a strict format check of the header, a hex decode and a
 * constant-time compare. Nothing else. Synchronous.
 */
export function limitVerify(secret, body, signature) {
  if (typeof signature !== "string" || !HEX64.test(signature)) return false;
  return timingSafeEqual(createHmac("sha256", secret).update(body).digest(), Buffer.from(signature, "hex"));
}

// ---------------------------------------------------------------- statistics and formatting

export function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

export function spread(values) {
  return { min: Math.min(...values), max: Math.max(...values) };
}

/** 1234.5 → "1,235"; small numbers keep a decimal or two. */
export function fmt(value, digits) {
  if (!Number.isFinite(value)) return "n/a";
  const d = digits ?? (Math.abs(value) >= 100 ? 0 : Math.abs(value) >= 10 ? 1 : 2);
  return value.toLocaleString("en-US", { minimumFractionDigits: d, maximumFractionDigits: d });
}

export function fmtRatio(value) {
  return Number.isFinite(value) ? `${value.toFixed(2)}×` : "n/a";
}

export function fmtBytes(size) {
  if (size >= 1024 * 1024) return `${size / (1024 * 1024)} MiB`;
  if (size >= 1024) return `${size / 1024} KiB`;
  return `${size} B`;
}

/**
 * A GitHub-flavoured markdown table; `align` is an array of "l" / "r". Columns are padded to a
 * common width, as the repository's formatter (Biome) lays tables out, so a pasted table stays
 * as it is.
 */
export function table(headers, rows, align = headers.map((_, i) => (i === 0 ? "l" : "r"))) {
  const all = [headers, ...rows].map((row) => row.map(String));
  const widths = headers.map((_, i) => Math.max(3, ...all.map((row) => [...row[i]].length)));
  const pad = (cell, i) => {
    const gap = " ".repeat(widths[i] - [...cell].length);
    return align[i] === "r" ? gap + cell : cell + gap;
  };
  const line = (cells) => `| ${cells.map(pad).join(" | ")} |`;
  const rule = `| ${align.map((a, i) => (a === "r" ? `${"-".repeat(widths[i] - 1)}:` : `:${"-".repeat(widths[i] - 1)}`)).join(" | ")} |`;
  return [line(all[0]), rule, ...all.slice(1).map(line)].join("\n");
}

/** One line describing the machine, printed above every result. */
export function machine() {
  const cpu = cpus();
  return `Node ${process.version}, ${type()} ${release()}, ${cpu.length} × ${cpu[0]?.model?.trim() ?? "unknown CPU"}`;
}

// ------------------------------------------------------------------------- receiver processes

const servers = new Set();

/**
 * Forks `script` (in bench/) as receiver `id`, with the built library's folder and `env`;
 * resolves with the child and the port it reported once listening.
 */
export function startServer(script, id, env = {}) {
  return new Promise((resolve, reject) => {
    const child = fork(join(BENCH_DIR, script), [id], {
      env: { ...process.env, FLAG_WEBHOOKS_DIST: distDir(), ...env },
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    servers.add(child);
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`${id}: server did not start within 15 s`));
    }, 15_000);
    child.once("message", (message) => {
      clearTimeout(timer);
      resolve({ child, port: message.port });
    });
    child.once("exit", (code) => {
      servers.delete(child);
      clearTimeout(timer);
      reject(new Error(`${id}: server exited early (code ${code})`));
    });
  });
}

/** Asks a receiver to stop, and kills it if it has not within 3 s. */
export function stopServer(child) {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    const timer = setTimeout(() => child.kill("SIGKILL"), 3000);
    child.once("exit", () => {
      clearTimeout(timer);
      servers.delete(child);
      resolve();
    });
    child.send("stop");
  });
}

/** Kills every receiver still running (for exit and signal handlers). */
export function killServers() {
  for (const child of servers) child.kill("SIGKILL");
}
