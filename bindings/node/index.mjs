// ESM entry: the same classes as the CommonJS one (one copy of each, so
// `instanceof` holds whichever way a program loads the package).
import cjs from './index.js';

export const { Locker, Lock, LockError, TakenError, NoQuorumError, LockLostError, RejectedError } = cjs;
export default cjs;
