#!/bin/sh
# The property tests of ordered delivery (docs/order.md) with many more runs than `npm test`
# makes: every store, one file at a time, at low priority. ORDER_PROPERTY_RUNS overrides the
# count (default 20,000 here, 1,000 in npm test).
set -e
cd "$(dirname "$0")/.."
export ORDER_PROPERTY_RUNS="${ORDER_PROPERTY_RUNS:-20000}"
for file in test/stores/order/memory.test.ts test/stores/order/redis.test.ts test/stores/order/redis-cluster.test.ts test/stores/order/dynamodb.test.ts test/stores/order/durable-object.test.ts test/stores/sqlite/order.test.ts test/stores/postgres/order.test.ts; do
  nice -n 10 npx vitest run "$file" --testTimeout=3600000
done
