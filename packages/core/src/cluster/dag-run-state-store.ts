/**
 * `@mocra/dag`'s {@link RunStateStore} (checkpoints) in the coordination KV: a run interrupted
 * by a node's death is resumed by whichever node takes its run guard next, which loads the
 * checkpoint and skips the nodes that already succeeded.
 *
 * ```
 *  {prefix}{key}             head: '{"token","runId","nodes":[…]}'  (changed by compare-and-set)
 *  {prefix}{key}/{nodeId}    one node's output: '{"token","runId","output"}' (payload envelope, base64)
 * ```
 *
 * Saving one node writes one small head update and one output key, not the whole checkpoint.
 * The head carries the highest token seen, so a save or clear from a deposed holder is refused
 * atomically; a cleared checkpoint keeps its head (with no nodes) for `clearedTtlMs`, so the
 * fence outlives it. A node listed in the head whose output is missing or belongs to another
 * run is left out of the checkpoint (it runs again), never restored wrongly.
 */
import {
  type CheckpointEntry,
  FencingTokenRejectedError,
  type Payload,
  type RunCheckpoint,
  type RunStateStore,
} from '@mocra/dag';
import type { Coordination } from '../coordination/types.js';
import { parseRecord, payloadFromText, payloadToText, updateKey } from './kv-update.js';

export interface CoordinationRunStateStoreOptions {
  /** Prefix of the keys. @default 'dag:state:' */
  prefix?: string;
  /** How long the head of a cleared checkpoint (and with it the fence) is kept. @default 86400000 (a day) */
  clearedTtlMs?: number;
  /** A checkpoint nobody saved to for this long is dropped. @default unlimited */
  ttlMs?: number;
}

interface Head {
  token: number | null;
  runId: string | null;
  nodes: string[];
}

function readHead(text: string | undefined): Head | undefined {
  const rec = parseRecord(text);
  if (rec === undefined) return undefined;
  return {
    token: typeof rec.token === 'number' ? rec.token : null,
    runId: typeof rec.runId === 'string' ? rec.runId : null,
    nodes: Array.isArray(rec.nodes) ? rec.nodes.filter((n): n is string => typeof n === 'string') : [],
  };
}

export function createCoordinationRunStateStore(
  coordination: Coordination,
  options: CoordinationRunStateStoreOptions = {},
): RunStateStore {
  const prefix = options.prefix ?? 'dag:state:';
  const clearedTtlMs = options.clearedTtlMs ?? 86_400_000;
  const ttl = options.ttlMs === undefined ? {} : { ttlMs: options.ttlMs };
  const headKey = (key: string) => `${prefix}${key}`;
  const nodeKey = (key: string, nodeId: string) => `${prefix}${key}/${nodeId}`;

  const fence = (key: string, head: Head | undefined, token: number | undefined): number | null => {
    const seen = head?.token ?? null;
    if (token === undefined) return seen;
    if (seen !== null && token < seen) throw new FencingTokenRejectedError(`run-state:${key}`, token, seen);
    return token;
  };

  return {
    async load(key): Promise<RunCheckpoint | undefined> {
      const head = readHead(await coordination.get(headKey(key)));
      if (head === undefined || head.runId === null) return undefined;
      const outputs = new Map<string, Payload>();
      const records = await Promise.all(head.nodes.map((n) => coordination.get(nodeKey(key, n))));
      head.nodes.forEach((nodeId, i) => {
        const rec = parseRecord(records[i]);
        if (rec?.runId === head.runId && typeof rec.output === 'string')
          outputs.set(nodeId, payloadFromText(rec.output));
      });
      return { runId: head.runId, fencingToken: head.token ?? undefined, outputs };
    },

    async save(key, entry: CheckpointEntry) {
      await updateKey(coordination, headKey(key), (current) => {
        const head = readHead(current);
        const token = fence(key, head, entry.fencingToken);
        const nodes = head === undefined || head.runId === null ? [] : head.nodes;
        const next: Head = {
          token,
          runId: entry.runId,
          nodes: nodes.includes(entry.nodeId) ? nodes : [...nodes, entry.nodeId],
        };
        return { write: JSON.stringify(next), ...ttl, result: undefined };
      });
      const value = JSON.stringify({
        token: entry.fencingToken ?? null,
        runId: entry.runId,
        output: payloadToText(entry.output),
      });
      await updateKey(coordination, nodeKey(key, entry.nodeId), (current) => {
        const held = parseRecord(current)?.token;
        if (entry.fencingToken !== undefined && typeof held === 'number' && entry.fencingToken < held)
          throw new FencingTokenRejectedError(`run-state:${key}`, entry.fencingToken, held);
        return { write: value, ...ttl, result: undefined };
      });
    },

    async clear(key, fencingToken) {
      const dropped = await updateKey(coordination, headKey(key), (current) => {
        const head = readHead(current);
        const token = fence(key, head, fencingToken);
        const next: Head = { token, runId: null, nodes: [] };
        return { write: JSON.stringify(next), ttlMs: clearedTtlMs, result: head?.nodes ?? [] };
      });
      // The outputs are unreachable from the head now; removing them just frees the space.
      await Promise.all(dropped.map((n) => coordination.delete(nodeKey(key, n)).catch(() => false)));
    },
  };
}
