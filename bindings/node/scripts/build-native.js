#!/usr/bin/env node
'use strict';
// npm's install script: builds the addon with cargo when it is missing
// (`npm install ./bindings/node` from another project runs it in this
// folder). A build by `make node` (napi build) is kept as it is.
// FORCE_BUILD=1 rebuilds anyway. CARGO_TARGET_DIR is honoured (default:
// the repository's target/node, the cache `make node` uses, when this
// folder is in the repository; else target/ in this folder).
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const out = path.join(root, 'redis-lock-client.node');
if (fs.existsSync(out) && !process.env.FORCE_BUILD) {
  process.exit(0);
}
const libs = { linux: 'libredis_lock_client_node.so', darwin: 'libredis_lock_client_node.dylib' };
const lib = libs[process.platform];
if (!lib) {
  console.error(`redis-lock-client: building on ${process.platform} is not supported yet`);
  process.exit(1);
}
const inRepo = fs.existsSync(path.join(root, '../../client/Cargo.toml'));
const targetDir =
  process.env.CARGO_TARGET_DIR || (inRepo ? path.join(root, '../../target/node') : path.join(root, 'target'));
console.error('redis-lock-client: building the native addon with cargo (release), this takes a few minutes');
const built = spawnSync(
  process.env.CARGO || 'cargo',
  ['build', '--release', '--manifest-path', path.join(root, 'Cargo.toml')],
  { stdio: 'inherit', env: { ...process.env, CARGO_TARGET_DIR: targetDir } },
);
if (built.error) {
  console.error(`redis-lock-client: cannot run cargo (${built.error.message}): install the Rust toolchain (https://rustup.rs)`);
  process.exit(1);
}
if (built.status !== 0) {
  process.exit(built.status ?? 1);
}
// Copied to a temporary name, then renamed: a process loading the addon
// meanwhile never sees half a file.
fs.copyFileSync(path.join(targetDir, 'release', lib), `${out}.tmp`);
fs.renameSync(`${out}.tmp`, out);
