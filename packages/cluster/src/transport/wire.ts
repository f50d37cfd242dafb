import { InvalidClusterMessageError } from '../errors.js';
import type { NodeRequest } from '../node/ports.js';
import type { LogEntry, RaftMessage, Snapshot } from '../raft/types.js';
import type { CommandEnvelope } from '../state/commands.js';
import { isRecord } from '../state/commands.js';

/**
 * Checks on everything that arrives over HTTP. A peer is trusted to run this code, not to be
 * well-formed: a bad body becomes {@link InvalidClusterMessageError}, never a crash inside Raft.
 */

/** The header that carries the optional shared secret between nodes. */
export const SECRET_HEADER = 'x-mocra-cluster-secret';
/** The header in which a node says where it can be reached (`host:port`). */
export const FROM_ADDR_HEADER = 'x-mocra-from-addr';

const NUMBER_FIELDS: Record<RaftMessage['type'], readonly string[]> = {
  append: ['prevIndex', 'prevTerm', 'commit'],
  'append-resp': ['index', 'hintIndex', 'hintTerm'],
  heartbeat: ['commit', 'round'],
  'heartbeat-resp': ['round'],
  vote: ['lastIndex', 'lastTerm'],
  'vote-resp': [],
  snapshot: [],
  'timeout-now': [],
  'read-index': [],
  'read-index-resp': [],
};

const ENTRY_KINDS = new Set(['noop', 'command', 'config']);

function fail(message: string): never {
  throw new InvalidClusterMessageError(message);
}

function isCount(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
}

function checkEntry(e: unknown): LogEntry {
  if (!isRecord(e) || !isCount(e.index) || !isCount(e.term) || typeof e.data !== 'string')
    fail('bad log entry');
  if (typeof e.kind !== 'string' || !ENTRY_KINDS.has(e.kind)) fail('bad log entry kind');
  return { index: e.index, term: e.term, kind: e.kind as LogEntry['kind'], data: e.data };
}

function checkSnapshot(s: unknown): Snapshot {
  if (!isRecord(s) || typeof s.data !== 'string' || !isRecord(s.meta)) fail('bad snapshot');
  const meta = s.meta;
  if (!isCount(meta.index) || !isCount(meta.term) || !isRecord(meta.config)) fail('bad snapshot meta');
  const config = meta.config;
  if (!Array.isArray(config.members) || !Array.isArray(config.retired)) fail('bad snapshot configuration');
  const members = config.members.map((m: unknown) => {
    if (
      !isRecord(m) ||
      typeof m.id !== 'string' ||
      typeof m.addr !== 'string' ||
      typeof m.voter !== 'boolean'
    ) {
      fail('bad member in snapshot configuration');
    }
    return { id: m.id, addr: m.addr, voter: m.voter };
  });
  const retired = config.retired.map((r: unknown) => (typeof r === 'string' ? r : fail('bad retired id')));
  return { meta: { index: meta.index, term: meta.term, config: { members, retired } }, data: s.data };
}

/** Parse one Raft message from untrusted JSON. */
export function parseRaftMessage(value: unknown): RaftMessage {
  if (!isRecord(value)) fail('a Raft message must be an object');
  const type = value.type;
  if (typeof type !== 'string' || !(type in NUMBER_FIELDS)) fail(`unknown Raft message type ${String(type)}`);
  if (typeof value.from !== 'string' || typeof value.to !== 'string' || !isCount(value.term)) {
    fail('a Raft message needs from, to and term');
  }
  for (const f of NUMBER_FIELDS[type as RaftMessage['type']]) {
    const v = value[f];
    // append-resp's index may be 0; read-index-resp's index may be -1 (checked below).
    if (!isCount(v)) fail(`${type}.${f} must be a non-negative integer`);
  }
  switch (type) {
    case 'append':
      if (!Array.isArray(value.entries)) fail('append.entries must be an array');
      return {
        ...(value as unknown as RaftMessage & { type: 'append' }),
        entries: value.entries.map(checkEntry),
      };
    case 'append-resp':
      if (typeof value.reject !== 'boolean') fail('append-resp.reject must be a boolean');
      break;
    case 'vote':
      if (typeof value.pre !== 'boolean' || typeof value.transfer !== 'boolean')
        fail('vote needs pre and transfer');
      break;
    case 'vote-resp':
      if (typeof value.pre !== 'boolean' || typeof value.reject !== 'boolean')
        fail('vote-resp needs pre and reject');
      break;
    case 'snapshot':
      return {
        type: 'snapshot',
        from: value.from,
        to: value.to,
        term: value.term,
        snapshot: checkSnapshot(value.snapshot),
      };
    case 'read-index':
      if (typeof value.ctx !== 'string') fail('read-index.ctx must be a string');
      break;
    case 'read-index-resp':
      if (typeof value.ctx !== 'string') fail('read-index-resp.ctx must be a string');
      if (typeof value.index !== 'number' || !Number.isSafeInteger(value.index) || value.index < -1) {
        fail('read-index-resp.index must be an integer ≥ -1');
      }
      break;
    default:
      break;
  }
  return value as unknown as RaftMessage;
}

/** Parse a batch of Raft messages (the body of `POST /raft/messages`). */
export function parseRaftMessages(value: unknown): RaftMessage[] {
  if (!Array.isArray(value)) fail('the body must be an array of Raft messages');
  return value.map(parseRaftMessage);
}

/** Parse a node request (the body of `POST /raft/request`). The command itself is checked by the node. */
export function parseNodeRequest(value: unknown): NodeRequest {
  if (!isRecord(value) || typeof value.kind !== 'string') fail('a request must be an object with a kind');
  switch (value.kind) {
    case 'propose':
      if (!isRecord(value.env)) fail('propose needs env');
      // The envelope is validated by the node (validateEnvelope) before anything is proposed.
      return { kind: 'propose', env: value.env as unknown as CommandEnvelope };
    case 'join':
      if (typeof value.id !== 'string' || typeof value.addr !== 'string') fail('join needs id and addr');
      return { kind: 'join', id: value.id, addr: value.addr };
    case 'remove':
      if (typeof value.id !== 'string') fail('remove needs id');
      return { kind: 'remove', id: value.id };
    case 'transfer':
      if (value.to !== null && typeof value.to !== 'string') fail('transfer.to must be a node id or null');
      return { kind: 'transfer', to: value.to };
    case 'app':
      if (typeof value.topic !== 'string' || !/^[\w.:-]{1,200}$/.test(value.topic))
        fail('app needs a topic of 1–200 characters of A–Z a–z 0–9 _ . : -');
      // The body is the application's to check (its handler validates it).
      return { kind: 'app', topic: value.topic, body: value.body };
    default:
      return fail(`unknown request kind ${value.kind}`);
  }
}
