export type { Coordination, CoordinationKind, LockLease, Member } from './types.js';
