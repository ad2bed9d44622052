import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { freePort } from "./free-port.js";
import { type RedisServer, startRedis, stopRedis } from "./redis-server.js";

// A real Redis Cluster for the tests of what holds there: three masters (no replicas) on free
// loopback ports, each a redis-server of test/support/redis-server.ts with cluster mode on, joined
// by `redis-cli --cluster create`, which splits the 16,384 hash slots between them.

const run = promisify(execFile);

/** Three redis-servers joined into one cluster; `nodes` are what a cluster client is given. */
export interface RedisCluster {
  servers: RedisServer[];
  nodes: { host: string; port: number }[];
}

/** Starts a cluster of three masters and waits until every node says the cluster is ok. */
export async function startRedisCluster(): Promise<RedisCluster> {
  const servers: RedisServer[] = [];
  try {
    for (let i = 0; i < 3; i++) {
      // The cluster bus port is chosen too (by default it is the port + 10000, which may be taken
      // or past 65535), afresh with each start startRedis tries.
      servers.push(
        await startRedis(async () => [
          "--cluster-enabled",
          "yes",
          "--cluster-port",
          String(await freePort()),
          "--cluster-config-file",
          "nodes.conf",
        ]),
      );
    }
    const nodes = servers.map((server) => ({ host: "127.0.0.1", port: server.port }));
    const addresses = nodes.map(({ host, port }) => `${host}:${port}`);
    await run("redis-cli", ["--cluster", "create", ...addresses, "--cluster-replicas", "0", "--cluster-yes"]);
    for (const { port } of nodes) {
      // Each node learns the others' slots over the bus, a moment after `create` returns.
      for (;;) {
        const { stdout } = await run("redis-cli", ["-p", String(port), "cluster", "info"]);
        if (stdout.includes("cluster_state:ok")) break;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
    return { servers, nodes };
  } catch (error) {
    for (const server of servers) await stopRedis(server);
    throw error;
  }
}

/** Stops every node of the cluster and removes their folders. */
export async function stopRedisCluster(cluster: RedisCluster | undefined): Promise<void> {
  for (const server of cluster?.servers ?? []) await stopRedis(server);
}
