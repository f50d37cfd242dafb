import { FencingTokenRejectedError } from '../errors.js';
import { decodePayload, encodePayload } from '../payload/envelope.js';
import type { Payload } from '../payload/payload.js';
import type { CheckpointEntry, RunCheckpoint, RunStateStore } from './types.js';

export interface MemoryRunStateStore extends RunStateStore {
  /** Keys that currently hold a checkpoint. */
  keys(): string[];
}

interface Stored {
  runId: string;
  fencingToken: number | undefined;
  outputs: Map<string, Uint8Array>;
}

/**
 * A run-state store for one process (a restarted *run*, not a restarted process, can resume
 * from it). Outputs are kept as envelopes, the way a remote store would keep them. Entries with
 * a token lower than the highest seen for their key are rejected.
 */
export function createMemoryRunStateStore(): MemoryRunStateStore {
  const runs = new Map<string, Stored>();
  const highest = new Map<string, number>();

  const fence = (key: string, token: number | undefined) => {
    const seen = highest.get(key);
    if (token === undefined) return;
    if (seen !== undefined && token < seen)
      throw new FencingTokenRejectedError(`run-state:${key}`, token, seen);
    highest.set(key, token);
  };

  return {
    async load(key): Promise<RunCheckpoint | undefined> {
      const stored = runs.get(key);
      if (stored === undefined) return undefined;
      const outputs = new Map<string, Payload>();
      for (const [nodeId, envelope] of stored.outputs) outputs.set(nodeId, decodePayload(envelope));
      return { runId: stored.runId, fencingToken: stored.fencingToken, outputs };
    },
    async save(key, entry: CheckpointEntry) {
      fence(key, entry.fencingToken);
      const envelope = encodePayload(entry.output);
      let stored = runs.get(key);
      if (stored === undefined) {
        stored = { runId: entry.runId, fencingToken: entry.fencingToken, outputs: new Map() };
        runs.set(key, stored);
      }
      stored.runId = entry.runId;
      stored.fencingToken = entry.fencingToken;
      stored.outputs.set(entry.nodeId, envelope);
    },
    async clear(key, fencingToken) {
      fence(key, fencingToken);
      runs.delete(key);
    },
    keys: () => [...runs.keys()],
  };
}
