import { hostBin, hostEnv, type Running, run, serve } from "./serve.js";

// How each app under test/hosts/ is built and served, the way its framework or platform does it
// in production. One driver per app; hosts.json's rows name the app and the route they use.

/** What a driver gets: a free loopback port, the endpoint secret, and the app's directory. */
export interface AppContext {
  port: number;
  secret: string;
  dir: string;
}

/** A served app: its URLs, what it printed, how long its steps took. */
export interface Served extends Running {
  url(path: string): string;
  /** Milliseconds of each step (build, start). */
  timings: Record<string, number>;
}

/** Times `step` into `timings[name]`. */
async function timed<T>(timings: Record<string, number>, name: string, step: () => Promise<T>): Promise<T> {
  const began = performance.now();
  try {
    return await step();
  } finally {
    timings[name] = Math.round(performance.now() - began);
  }
}

function served(running: Running, port: number, timings: Record<string, number>): Served {
  return { ...running, url: (path) => `http://127.0.0.1:${port}${path}`, timings };
}

export const apps: Record<string, (context: AppContext) => Promise<Served>> = {
  // Next.js: `next build`, then `next start`, as deployed on a server of one's own. The build
  // runs without the secret, as a CI build does.
  async next({ port, secret, dir }) {
    const timings: Record<string, number> = {};
    await timed(timings, "build", () => run("next build", process.execPath, [hostBin("next"), "build"], dir));
    const running = await timed(timings, "start", () =>
      serve(
        "next start",
        process.execPath,
        [hostBin("next"), "start", "--port", String(port), "--hostname", "127.0.0.1"],
        dir,
        hostEnv({ WEBHOOK_SECRET: secret }),
        port,
      ),
    );
    return served(running, port, timings);
  },
};
