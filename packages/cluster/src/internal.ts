// @mocra/cluster/internal — building blocks with no semver promise: the deterministic Raft core,
// the control state machine, the LevelDB log and the HTTP transport. The simulator and the
// multi-process tests use them; applications should use the public entry.

export {
  applyConfigChange,
  decodeConfiguration,
  encodeConfiguration,
  quorumSize,
  voterIds,
} from './raft/configuration.js';
export type {
  ProposeResult,
  RaftCoreOptions,
  RaftEvent,
  RaftProgressView,
  RaftRestoreState,
  RaftStatus,
} from './raft/raft-core.js';
export { RaftCore } from './raft/raft-core.js';
export { RaftLog } from './raft/raft-log.js';
export type {
  ConfigChange,
  EntryKind,
  HardState,
  LogEntry,
  NodeId,
  RaftConfiguration,
  RaftMember,
  RaftMessage,
  ReadState,
  Ready,
  Role,
  Snapshot,
  SnapshotMeta,
} from './raft/types.js';
export type { CommandEnvelope, CommandResult, Operation } from './state/commands.js';
export { validateEnvelope, validateOperation } from './state/commands.js';
export type { LockState, MemberRecord } from './state/control-state.js';
export { ControlState } from './state/control-state.js';
export type { KvEngine, KvOp } from './storage/kv-engine.js';
export { LevelKvEngine } from './storage/level-engine.js';
export type { RecoveredState, SaveRequest } from './storage/raft-storage.js';
export { RaftStorage } from './storage/raft-storage.js';
export type { HttpPeerServerOptions } from './transport/http-server.js';
export { HttpPeerServer } from './transport/http-server.js';
export type { HttpTransportOptions } from './transport/http-transport.js';
export { HttpTransport } from './transport/http-transport.js';
export { parseNodeRequest, parseRaftMessage, parseRaftMessages, SECRET_HEADER } from './transport/wire.js';
