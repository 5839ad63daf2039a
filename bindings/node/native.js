'use strict';
// The compiled addon: built by `make node` (napi build) or, when missing,
// by the install script (scripts/build-native.js) with cargo.
const path = require('node:path');

const file = path.join(__dirname, 'redis-lock-client.node');
try {
  module.exports = require(file);
} catch (e) {
  if (e && e.code === 'MODULE_NOT_FOUND' && String(e.message).includes(file)) {
    throw new Error(
      `redis-lock-client: the native addon ${file} is not built; run ` +
        '`node scripts/build-native.js` in the package folder (needs the Rust toolchain)',
      { cause: e },
    );
  }
  throw e;
}
