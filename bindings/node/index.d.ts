// Types of redis-lock-client (hand-written beside index.js; the native
// layer's generated types are in native.d.ts after a build).

/** Why one node did not grant, extend or release. */
export interface NodeCause {
  /** `host:port` of the node. */
  node: string;
  /** What went wrong there (timeout, refused, TRYAGAIN, the server's error). */
  cause: string;
}

/** Base class of every lock failure. */
export class LockError extends Error {
  /** LOCK_TAKEN | LOCK_NO_QUORUM | LOCK_LOST | LOCK_REJECTED | LOCK_ERROR */
  readonly code: string;
  /** Per-node causes (empty when the failure has none, e.g. TakenError). */
  readonly causes: NodeCause[];
}
/** Another owner holds the lock and it did not come free within `wait`. */
export class TakenError extends LockError {
  readonly code: 'LOCK_TAKEN';
}
/** Not enough servers answered: an outage, not contention. */
export class NoQuorumError extends LockError {
  readonly code: 'LOCK_NO_QUORUM';
  readonly granted: number;
  readonly needed: number;
}
/** The lock expired or was taken over: stop touching what it protects. */
export class LockLostError extends LockError {
  readonly code: 'LOCK_LOST';
}
/** A server refused for a reason retrying cannot fix (TTL above
 * lock.max-ttl-ms, NOPERM, the module not loaded...). */
export class RejectedError extends LockError {
  readonly code: 'LOCK_REJECTED';
}

export interface LockerOptions {
  /** Default lock TTL in ms (default 10000, at least 10). */
  ttl?: number;
  /** Deadline of one request to one server in ms (default ttl/20, clamped to 5-500). */
  nodeTimeout?: number;
  /** Cap on acquisition rounds per lock() (default: none; the servers queue waiters). */
  retryCount?: number;
  /** Pause between rounds in ms, or [min, max] (default [50, 250]). */
  retryDelay?: number | [number, number];
  /** Clock drift allowance, a fraction of the TTL in [0, 0.5) (default 0.01). */
  driftFactor?: number;
  /** Raise tokens on lagging servers so tokens always increase (default true). */
  fencing?: boolean;
}

export interface LockOptions {
  /** Ms to keep trying while another owner holds the lock (default 0: one attempt). */
  wait?: number;
  /** This lock's TTL in ms instead of the Locker's. */
  ttl?: number;
  /** Renew in the background until released (default true). */
  autoRenew?: boolean;
  /** The same owner taking it again adds a hold (pass `owner: held.owner`). */
  reentrant?: boolean;
  /** Owner value (default: 128 random bits). */
  owner?: string;
}

export type UsingOptions = Omit<LockOptions, 'autoRenew'>;

/** A lock held on a majority of the servers. */
export class Lock {
  private constructor();
  readonly name: string;
  readonly owner: string;
  /** Fencing token: larger than every earlier holder's token of this name. */
  readonly token: bigint;
  /** TTL in ms that renewals and extend() reset the lock to. */
  readonly ttl: number;
  /** Ms the lock is still known to be valid (0 once it may have expired, and after release()). */
  readonly validity: number;
  /** True once the lock can no longer be trusted: stop touching the resource. */
  readonly lost: boolean;
  readonly released: boolean;
  readonly autoRenew: boolean;
  /** Aborted (reason: a LockLostError) when the lock is lost; already aborted if it was lost
   * before this first read. Holding the signal keeps the Lock (it is not collected and released). */
  readonly signal: AbortSignal;
  /** Reset the TTL on a majority (to `ttl` ms if given, which renewals keep). */
  extend(ttl?: number): Promise<void>;
  /** Stop renewing and release on every server (again after success: does nothing; after a
   * failure: tries again). */
  release(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

/** Quorum (Redlock) client over independent Redis/Valkey servers running the redis-lock module. */
export class Locker {
  constructor(urls: string | string[], options?: LockerOptions);
  readonly urls: string[];
  readonly ttl: number;
  readonly nodeTimeout: number;
  /** Acquire `name` on a majority of the servers. */
  lock(name: string | Buffer, options?: LockOptions): Promise<Lock>;
  /** Run `fn` holding `name` (renewed while it runs), release when it settles. Rejects with
   * LockLostError if the lock was lost while `fn` ran (`fn`'s own error, if any, as its cause). */
  using<T>(name: string | Buffer, options: UsingOptions | undefined, fn: (signal: AbortSignal, lock: Lock) => Promise<T> | T): Promise<T>;
  using<T>(name: string | Buffer, fn: (signal: AbortSignal, lock: Lock) => Promise<T> | T): Promise<T>;
}
