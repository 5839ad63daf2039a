'use strict';
// redis-lock-client: distributed locks on the redis-lock module's quorum
// client (Rust, through napi-rs). This file checks arguments (TypeError /
// RangeError naming the argument), makes the error classes, and turns the
// native outcomes into them. Every wait runs on the core's tokio runtime:
// the event loop is never blocked.
const { isMainThread } = require('node:worker_threads');
const { NativeLocker, NativeLock, atExit } = require('./native.js');

// A process that exits holding locks releases them first (those whose
// owner is its own), waiting at most 2 s: process.exit() skips the native
// env's cleanup hook, which does the same at the end of a worker thread.
process.once('exit', () => atExit(isMainThread));

/** The largest TTL or wait the servers accept (lock.max-ttl-ms's range). */
const MAX_MS = 2 ** 40;
/** The smallest TTL (the crate's MIN_TTL). */
const MIN_TTL_MS = 10;

class LockError extends Error {
  constructor(message, { code = 'LOCK_ERROR', causes = [], cause } = {}) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = new.target.name;
    /** A string naming the kind of failure. */
    this.code = code;
    /** Per-node causes: [{ node: 'host:port', cause: '...' }]. */
    this.causes = causes;
  }
}

/** Another owner holds the lock and it did not come free within `wait`. */
class TakenError extends LockError {
  constructor(message, options = {}) {
    super(message, { ...options, code: 'LOCK_TAKEN' });
  }
}

/** Not enough servers answered: an outage, not contention. */
class NoQuorumError extends LockError {
  constructor(message, { granted = 0, needed = 0, ...options } = {}) {
    super(message, { ...options, code: 'LOCK_NO_QUORUM' });
    this.granted = granted;
    this.needed = needed;
  }
}

/** The lock expired or was taken over: stop touching what it protects. */
class LockLostError extends LockError {
  constructor(message, options = {}) {
    super(message, { ...options, code: 'LOCK_LOST' });
  }
}

/** A server refused for a reason retrying cannot fix (TTL above
 * lock.max-ttl-ms, NOPERM, the module not loaded...). */
class RejectedError extends LockError {
  constructor(message, options = {}) {
    super(message, { ...options, code: 'LOCK_REJECTED' });
  }
}

function fromFailure(f) {
  const causes = f.causes || [];
  switch (f.kind) {
    case 'taken':
      return new TakenError(f.message, { causes });
    case 'no-quorum':
      return new NoQuorumError(f.message, { causes, granted: f.granted, needed: f.needed });
    case 'lost':
      return new LockLostError(f.message, { causes });
    case 'rejected':
      return new RejectedError(f.message, { causes });
    case 'config':
      return new RangeError(f.message);
    default:
      return new LockError(f.message, { causes });
  }
}

/** A native InvalidArg error (the last line of argument checks) as the
 * TypeError/RangeError it is; anything else unchanged. */
function argumentError(e) {
  if (e && e.code === 'InvalidArg') {
    return /URL/.test(e.message) ? new TypeError(`urls: ${e.message}`) : new RangeError(e.message);
  }
  return e;
}

function describe(value) {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'bigint') return `${value}n`;
  try {
    return String(value);
  } catch {
    return typeof value;
  }
}

/** `value` milliseconds: a number from `min` to MAX_MS. */
function millis(what, value, min = 0) {
  if (typeof value !== 'number') {
    throw new TypeError(`${what} must be a number of milliseconds, got ${typeof value} ${describe(value)}`);
  }
  if (!Number.isFinite(value) || value < min || value > MAX_MS) {
    throw new RangeError(`${what} must be a finite number of milliseconds from ${min} to ${MAX_MS}, got ${describe(value)}`);
  }
  return value;
}

/** The options object `value` read once: each of `keys` by one get, into
 * a plain object the checks and the native call then share. Checked and
 * used through separate reads, a getter could pass the check with one
 * value and reach the native layer with another (an owner getter
 * answering 'abc' to the checks and then 5 came back as a plain Error). */
function options(what, value, keys) {
  if (value === undefined || value === null) return {};
  if (typeof value !== 'object' || Array.isArray(value)) {
    throw new TypeError(`${what} must be an object, got ${describe(value)}`);
  }
  const read = {};
  for (const key of keys) read[key] = value[key];
  return read;
}

const LOCKER_OPTIONS = ['ttl', 'nodeTimeout', 'retryCount', 'retryDelay', 'driftFactor', 'fencing'];
const LOCK_OPTIONS = ['wait', 'ttl', 'autoRenew', 'reentrant', 'owner'];

function bool(what, value, fallback) {
  if (value === undefined) return fallback;
  if (typeof value !== 'boolean') throw new TypeError(`${what} must be a boolean, got ${describe(value)}`);
  return value;
}

/** Whether `text` has no lone surrogate: napi turns each into U+FFFD on
 * the way in, so "job\uD800" and "job\uDBFF" were one lock (2026-11-29). */
const wellFormed = typeof String.prototype.isWellFormed === 'function'
  ? (text) => text.isWellFormed()
  : (text) => !/[\uD800-\uDFFF]/.test(text) || Buffer.from(text, 'utf8').toString('utf8') === text;

function lockName(name) {
  let text = name;
  if (Buffer.isBuffer(name)) {
    text = name.toString('utf8');
    if (!Buffer.from(text, 'utf8').equals(name)) {
      throw new TypeError('name: a Buffer lock name must be valid UTF-8');
    }
  } else if (typeof name !== 'string') {
    throw new TypeError(`name must be a string or a Buffer, got ${typeof name} ${describe(name)}`);
  } else if (!wellFormed(name)) {
    throw new TypeError('name must be well-formed Unicode: it has a lone surrogate (\\uD800-\\uDFFF)');
  }
  if (text.length === 0) throw new RangeError('name must not be empty');
  return text;
}

/** The signal's hidden reference to its Lock (see Lock.#watch). */
const kLock = Symbol('redis-lock-client.lock');

const asyncDispose = typeof Symbol.asyncDispose === 'symbol' ? Symbol.asyncDispose : Symbol.for('nodejs.asyncDispose');

/** A lock held on a majority of the servers. */
class Lock {
  #native;
  /** Made when `signal` is first asked for: most locks are released
   * without anyone reading it, and an AbortController per lock was a
   * measurable part of a lock + release (2026-11-28). */
  #controller = null;

  /** @internal made by Locker.lock() */
  constructor(native) {
    this.#native = native;
  }

  /** Make the controller and start the native loss watcher, once, when
   * `signal` is first asked for (a lock whose signal nobody reads does not
   * pay for either).
   *
   * The signal holds this Lock: code that keeps only the signal (`const {
   * signal } = await locker.lock(...)`, or `work(lock.signal)` after the
   * function that took the lock returned) keeps the lock. Before, the Lock
   * was collected, released by its finalizer, and the signal never
   * aborted, while a rival took the lock (2026-11-29). The watcher's
   * callback reaches the controller only weakly, so a Lock whose signal
   * and itself nobody holds can still be collected (and is then released
   * in the background). A lock lost before the signal is first read
   * aborts it there and then, so `throwIfAborted()` right after throws. */
  #watch() {
    if (this.#controller !== null) return;
    const controller = new AbortController();
    this.#controller = controller;
    Object.defineProperty(controller.signal, kLock, { value: this });
    const name = this.#native.name;
    const lostError = () => new LockLostError(`lock ${JSON.stringify(name)} was lost: stop touching the resource it protects`);
    if (this.#native.lost) {
      controller.abort(lostError());
      return;
    }
    const weak = new WeakRef(controller);
    this.#native.onLost(() => {
      weak.deref()?.abort(lostError());
    });
  }

  /** The lock's name (the key on every server). */
  get name() { return this.#native.name; }
  /** The owner value it was taken with (random unless given). */
  get owner() { return this.#native.owner; }
  /** Fencing token (bigint): larger than every earlier holder's. */
  get token() { return this.#native.token; }
  /** TTL in ms that renewals and extend() reset the lock to. */
  get ttl() { return this.#native.ttl; }
  /** Milliseconds the lock is still known to be valid (0 once it may have expired, and after release()). */
  get validity() { return this.#native.released ? 0 : this.#native.validity; }
  /** True once the lock can no longer be trusted: stop touching the resource. */
  get lost() { return this.#native.lost; }
  /** True once release() succeeded (or found the lock already gone). */
  get released() { return this.#native.released; }
  /** Whether it is renewed in the background. */
  get autoRenew() { return this.#native.autoRenew; }
  /** Aborted (reason: a LockLostError) when the lock is lost. */
  get signal() {
    this.#watch();
    return this.#controller.signal;
  }

  /** Reset the TTL on a majority (to `ttl` ms if given, which later
   * renewals keep). Rejects with LockLostError if it is no longer held,
   * NoQuorumError if too few servers answered. */
  async extend(ttl) {
    if (ttl !== undefined) millis('ttl', ttl, MIN_TTL_MS);
    let failure;
    try {
      failure = await this.#native.extend(ttl);
    } catch (e) {
      throw argumentError(e);
    }
    if (failure) throw fromFailure(failure);
  }

  /** Stop renewing and release on every server. Again after success it
   * does nothing. Rejects with LockLostError if the lock had expired or
   * been taken over. */
  async release() {
    const failure = await this.#native.release();
    if (failure) throw fromFailure(failure);
  }

  /** `await using lock = await locker.lock(...)` releases at the end of the block. */
  [asyncDispose]() {
    return this.release();
  }

  toString() {
    return `Lock(${JSON.stringify(this.name)}, token ${this.token}${this.lost ? ', lost' : ''}${this.released ? ', released' : ''})`;
  }
}

/** Quorum (Redlock) client over independent Redis/Valkey servers running
 * the redis-lock module. Times in milliseconds. Share one per process (or
 * per worker thread). */
class Locker {
  #native;

  constructor(urls, opts) {
    if (typeof urls === 'string') urls = [urls];
    if (!Array.isArray(urls)) {
      throw new TypeError(`urls must be an array of server URLs, got ${describe(urls)}`);
    }
    // Read once (a hole is undefined, and a Proxy cannot change it after
    // the checks): forEach skipped holes, which reached the native layer.
    urls = Array.from(urls);
    if (urls.length === 0) throw new RangeError('urls must name at least one server');
    urls.forEach((u, i) => {
      if (typeof u !== 'string') throw new TypeError(`urls[${i}] must be a string, got ${typeof u} ${describe(u)}`);
    });
    const o = options('options', opts, LOCKER_OPTIONS);
    const native = { ttl: millis('ttl', o.ttl === undefined ? 10_000 : o.ttl, MIN_TTL_MS) };
    if (o.nodeTimeout !== undefined) native.nodeTimeout = millis('nodeTimeout', o.nodeTimeout, 1);
    if (o.retryCount !== undefined) {
      if (!Number.isInteger(o.retryCount)) throw new TypeError(`retryCount must be an integer, got ${describe(o.retryCount)}`);
      if (o.retryCount < 1 || o.retryCount > 2 ** 32 - 1) throw new RangeError(`retryCount must be from 1 to ${2 ** 32 - 1}, got ${o.retryCount}`);
      native.retryCount = o.retryCount;
    }
    if (o.retryDelay !== undefined) {
      const d = o.retryDelay;
      const [min, max] = typeof d === 'number' ? [d, d] : Array.isArray(d) && d.length === 2 ? Array.from(d) : [undefined, undefined];
      if (min === undefined) throw new TypeError(`retryDelay must be ms or [min, max] ms, got ${describe(d)}`);
      native.retryDelayMin = millis('retryDelay[0]', min);
      native.retryDelayMax = millis('retryDelay[1]', max);
      if (min > max) throw new RangeError('retryDelay: min must not exceed max');
    }
    if (o.driftFactor !== undefined) {
      if (typeof o.driftFactor !== 'number') throw new TypeError(`driftFactor must be a number, got ${describe(o.driftFactor)}`);
      if (!(o.driftFactor >= 0 && o.driftFactor < 0.5)) throw new RangeError(`driftFactor must be in [0, 0.5), got ${o.driftFactor}`);
      native.driftFactor = o.driftFactor;
    }
    native.fencing = bool('fencing', o.fencing, true);
    try {
      this.#native = new NativeLocker(urls, native);
    } catch (e) {
      throw argumentError(e);
    }
  }

  /** The server URLs, one per node. */
  get urls() { return this.#native.urls; }
  /** Default lock TTL in ms. */
  get ttl() { return this.#native.ttl; }
  /** Deadline of one request to one server, in ms. */
  get nodeTimeout() { return this.#native.nodeTimeout; }

  /** Acquire `name` on a majority of the servers. Options: `wait` (ms to
   * wait while another owner holds it; 0: one attempt), `ttl` (this lock's
   * TTL), `autoRenew` (default true: renewed until released; `signal`
   * aborts if that fails), `reentrant`, `owner`. Rejects with TakenError,
   * NoQuorumError, RejectedError; TypeError/RangeError for bad arguments. */
  async lock(name, opts) {
    const text = lockName(name);
    const o = options('options', opts, LOCK_OPTIONS);
    const wait = o.wait === undefined ? 0 : millis('wait', o.wait);
    const autoRenew = bool('autoRenew', o.autoRenew, true);
    const reentrant = bool('reentrant', o.reentrant, false);
    const ttl = o.ttl === undefined ? undefined : millis('ttl', o.ttl, MIN_TTL_MS);
    if (o.owner !== undefined) {
      if (typeof o.owner !== 'string') throw new TypeError(`owner must be a string, got ${describe(o.owner)}`);
      if (o.owner.length === 0) throw new RangeError('owner must not be empty');
      if (!wellFormed(o.owner)) {
        throw new TypeError('owner must be well-formed Unicode: it has a lone surrogate (\\uD800-\\uDFFF)');
      }
    }
    let outcome;
    try {
      outcome = await this.#native.acquire(text, wait, ttl, autoRenew, reentrant, o.owner);
    } catch (e) {
      throw argumentError(e);
    }
    if (!(outcome instanceof NativeLock)) throw fromFailure(outcome);
    return new Lock(outcome);
  }

  /** Run `fn(signal, lock)` holding `name`, renewed while it runs, and
   * release when it settles (also on throw). `signal` aborts when the lock
   * is lost. Resolves to what `fn` returned; rejects with LockLostError if
   * the lock was lost while it ran (with `fn`'s error as its cause if `fn`
   * threw), otherwise with `fn`'s error. */
  async using(name, opts, fn) {
    if (typeof opts === 'function' && fn === undefined) {
      fn = opts;
      opts = undefined;
    }
    if (typeof fn !== 'function') throw new TypeError(`fn must be a function, got ${describe(fn)}`);
    const o = options('options', opts, LOCK_OPTIONS);
    const lock = await this.lock(name, { ...o, autoRenew: true });
    let result;
    try {
      result = await fn(lock.signal, lock);
    } catch (e) {
      await lock.release().catch(() => {});
      // The function's own error after a loss still says the lock was
      // lost, with that error as its cause: the loss is what the caller
      // must learn (the work it guarded may have run unprotected), and
      // rethrown alone it hid the loss (2026-11-29).
      if (lock.lost && !(e instanceof LockLostError)) {
        throw new LockLostError(
          `lock ${JSON.stringify(lock.name)} was lost while the function ran, which then failed (the cause)`,
          { cause: e },
        );
      }
      throw e;
    }
    try {
      await lock.release();
    } catch (e) {
      if (lock.lost && !(e instanceof LockLostError)) {
        throw new LockLostError(`lock ${JSON.stringify(lock.name)} was lost while the function ran`, { cause: e });
      }
      throw e;
    }
    if (lock.lost) {
      throw new LockLostError(
        `lock ${JSON.stringify(lock.name)} ran out of validity while the function ran (renewal failed or came too late): the end of the function was not protected by it`,
      );
    }
    return result;
  }
}

module.exports = { Locker, Lock, LockError, TakenError, NoQuorumError, LockLostError, RejectedError };
