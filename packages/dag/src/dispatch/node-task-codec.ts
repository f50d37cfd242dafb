/**
 * The wire form of a {@link NodeTask}, for dispatchers that send node attempts to other
 * processes. Version 1 (little-endian):
 *
 * ```
 *  0  4  magic "MDGT" · 4  1  version = 1
 *  run id (u16 len + UTF-8) · node id (u16 len + UTF-8) · attempt (u32) · layer (u32)
 *  presence flags (u8): 1 fencing token · 2 deadline · 4 worker group · 8 idempotency key
 *  [fencing token (f64, a safe integer)] [deadline (f64)] [worker group (u16 + UTF-8)] [idempotency key (u16 + UTF-8)]
 *  upstream: entry count (u32), then per entry sorted by id: id (u16 + UTF-8), payload envelope (u32 len + bytes)
 * ```
 */
import { InvalidEnvelopeError } from '../errors.js';
import { BinaryReader, BinaryWriter, utf8 } from '../payload/binary.js';
import { readPayloadEntries, writePayloadEntries } from '../payload/envelope.js';
import type { NodeTask } from './types.js';

export const NODE_TASK_VERSION = 1;
const MAGIC = utf8('MDGT');
const HAS_TOKEN = 1;
const HAS_DEADLINE = 2;
const HAS_GROUP = 4;
const HAS_KEY = 8;

export function encodeNodeTask(task: NodeTask): Uint8Array {
  const w = new BinaryWriter();
  w.raw(MAGIC).u8(NODE_TASK_VERSION);
  w.str16(task.runId, 'run id').str16(task.nodeId, 'node id').u32(task.attempt).u32(task.layer);
  const flags =
    (task.fencingToken === undefined ? 0 : HAS_TOKEN) |
    (task.deadline === undefined ? 0 : HAS_DEADLINE) |
    (task.workerGroup === undefined ? 0 : HAS_GROUP) |
    (task.idempotencyKey === undefined ? 0 : HAS_KEY);
  w.u8(flags);
  if (task.fencingToken !== undefined) w.f64(task.fencingToken);
  if (task.deadline !== undefined) w.f64(task.deadline);
  if (task.workerGroup !== undefined) w.str16(task.workerGroup, 'worker group');
  if (task.idempotencyKey !== undefined) w.str16(task.idempotencyKey, 'idempotency key');
  writePayloadEntries(w, task.upstream);
  return w.finish();
}

export function decodeNodeTask(bytes: Uint8Array): NodeTask {
  if (!(bytes instanceof Uint8Array))
    throw new InvalidEnvelopeError('invalid-field', 'envelope must be a Uint8Array');
  const r = new BinaryReader(bytes);
  r.header(MAGIC, NODE_TASK_VERSION, 'node task');
  const runId = r.str16('run id');
  const nodeId = r.str16('node id');
  const attempt = r.u32('attempt');
  const layer = r.u32('layer');
  const flags = r.u8('flags');
  if ((flags & ~(HAS_TOKEN | HAS_DEADLINE | HAS_GROUP | HAS_KEY)) !== 0) {
    throw new InvalidEnvelopeError('invalid-field', `unknown flags 0x${flags.toString(16)}`);
  }
  const fencingToken = flags & HAS_TOKEN ? r.f64('fencing token') : undefined;
  if (fencingToken !== undefined && !Number.isSafeInteger(fencingToken)) {
    throw new InvalidEnvelopeError('invalid-field', `fencing token ${fencingToken} is not a safe integer`);
  }
  const deadline = flags & HAS_DEADLINE ? r.f64('deadline') : undefined;
  if (deadline !== undefined && !Number.isFinite(deadline))
    throw new InvalidEnvelopeError('invalid-field', 'deadline is not finite');
  const workerGroup = flags & HAS_GROUP ? r.str16('worker group') : undefined;
  const idempotencyKey = flags & HAS_KEY ? r.str16('idempotency key') : undefined;
  if (runId.length === 0 || nodeId.length === 0)
    throw new InvalidEnvelopeError('invalid-field', 'run id and node id must not be empty');
  if (attempt < 1) throw new InvalidEnvelopeError('invalid-field', 'attempt must be at least 1');
  const upstream = readPayloadEntries(r);
  r.end('node task');
  return { runId, fencingToken, nodeId, attempt, layer, workerGroup, idempotencyKey, deadline, upstream };
}
