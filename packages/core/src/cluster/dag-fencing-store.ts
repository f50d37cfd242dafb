/**
 * `@mocra/dag`'s {@link FencingStore} in the coordination KV, so that a run that lost its guard
 * (a paused process, a node cut off from the cluster) cannot overwrite the outputs of the run
 * that replaced it, whichever node either runs on.
 *
 * ```
 *  {prefix}{resource}               highest token accepted            (raised by compare-and-set)
 *  {prefix}{resource}/{nodeId}      '{"token","runId","output"}'       (output: payload envelope, base64)
 * ```
 *
 * A commit first raises the resource's head to its token (refused when the head is higher),
 * then writes the node's output, refused again if that key already holds a higher token — so a
 * stale holder that passed the head check just before being overtaken still cannot overwrite
 * what the newer holder wrote for the same node.
 */
import { type FencedCommit, type FencingStore, FencingTokenRejectedError, type Payload } from '@mocra/dag';
import type { Coordination } from '../coordination/types.js';
import { InvalidArgumentError } from '../errors.js';
import { parseRecord, payloadFromText, payloadToText, updateKey } from './kv-update.js';

export interface CoordinationFencingStoreOptions {
  /** Prefix of the keys. @default 'dag:fence:' */
  prefix?: string;
  /** Outputs (and heads) are dropped this long after their last commit. @default unlimited */
  ttlMs?: number;
}

export interface CoordinationFencingStore extends FencingStore {
  /** The highest token accepted for `resource`, if any. */
  highestToken(resource: string): Promise<number | undefined>;
  /** The output last committed for `nodeId` under `resource`, with the token it was written with. */
  committed(
    resource: string,
    nodeId: string,
  ): Promise<{ token: number; runId: string; output: Payload } | undefined>;
}

export function createCoordinationFencingStore(
  coordination: Coordination,
  options: CoordinationFencingStoreOptions = {},
): CoordinationFencingStore {
  const prefix = options.prefix ?? 'dag:fence:';
  const ttl = options.ttlMs === undefined ? {} : { ttlMs: options.ttlMs };
  const head = (resource: string) => `${prefix}${resource}`;
  const out = (resource: string, nodeId: string) => `${prefix}${resource}/${nodeId}`;

  return {
    async commit(commit: FencedCommit) {
      if (!Number.isSafeInteger(commit.token))
        throw new InvalidArgumentError(`fencing token must be a safe integer, got ${commit.token}`);
      await updateKey(coordination, head(commit.resource), (current) => {
        const seen = current === undefined ? undefined : Number(current);
        if (seen !== undefined && commit.token < seen)
          throw new FencingTokenRejectedError(commit.resource, commit.token, seen);
        return { write: String(commit.token), ...ttl, result: undefined };
      });
      const value = JSON.stringify({
        token: commit.token,
        runId: commit.runId,
        output: payloadToText(commit.output),
      });
      await updateKey(coordination, out(commit.resource, commit.nodeId), (current) => {
        const held = parseRecord(current)?.token;
        if (typeof held === 'number' && commit.token < held)
          throw new FencingTokenRejectedError(commit.resource, commit.token, held);
        return { write: value, ...ttl, result: undefined };
      });
    },
    async highestToken(resource) {
      const v = await coordination.get(head(resource));
      return v === undefined ? undefined : Number(v);
    },
    async committed(resource, nodeId) {
      const rec = parseRecord(await coordination.get(out(resource, nodeId)));
      if (rec === undefined || typeof rec.token !== 'number' || typeof rec.output !== 'string')
        return undefined;
      return { token: rec.token, runId: String(rec.runId), output: payloadFromText(rec.output) };
    },
  };
}
