import { FencingTokenRejectedError, InvalidOptionsError } from '../errors.js';
import { decodePayload, encodePayload } from '../payload/envelope.js';
import type { Payload } from '../payload/payload.js';
import type { FencedCommit, FencingStore } from './types.js';

export interface MemoryFencingStore extends FencingStore {
  /** The highest token accepted for `resource`, if any. */
  highestToken(resource: string): number | undefined;
  /** The output last committed for `nodeId` under `resource`, with the token it was written with. */
  committed(resource: string, nodeId: string): { token: number; runId: string; output: Payload } | undefined;
}

/**
 * A fencing store for one process. Outputs are kept as envelopes (copied in, decoded out), the
 * way a remote store would keep them.
 */
export function createMemoryFencingStore(): MemoryFencingStore {
  const highest = new Map<string, number>();
  const outputs = new Map<string, Map<string, { token: number; runId: string; envelope: Uint8Array }>>();
  return {
    async commit(commit: FencedCommit) {
      if (!Number.isSafeInteger(commit.token)) {
        throw new InvalidOptionsError('token', `must be a safe integer, got ${commit.token}`);
      }
      const seen = highest.get(commit.resource);
      if (seen !== undefined && commit.token < seen) {
        throw new FencingTokenRejectedError(commit.resource, commit.token, seen);
      }
      const envelope = encodePayload(commit.output);
      highest.set(commit.resource, commit.token);
      let byNode = outputs.get(commit.resource);
      if (byNode === undefined) {
        byNode = new Map();
        outputs.set(commit.resource, byNode);
      }
      byNode.set(commit.nodeId, { token: commit.token, runId: commit.runId, envelope });
    },
    highestToken: (resource) => highest.get(resource),
    committed(resource, nodeId) {
      const entry = outputs.get(resource)?.get(nodeId);
      return entry && { token: entry.token, runId: entry.runId, output: decodePayload(entry.envelope) };
    },
  };
}
