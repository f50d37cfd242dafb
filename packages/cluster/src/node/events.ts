import diagnostics from 'node:diagnostics_channel';
import type { NodeId, Role } from '../raft/types.js';

/**
 * What a node reports about itself, for metrics and logs. Every event goes to the `onEvent`
 * callback (if given) and to the `node:diagnostics_channel` channel `mocra:cluster:<type>`.
 */
export type ClusterEvent =
  | { readonly type: 'role'; readonly nodeId: NodeId; readonly role: Role; readonly term: number }
  | {
      readonly type: 'leader';
      readonly nodeId: NodeId;
      readonly leader: NodeId | null;
      readonly term: number;
    }
  | {
      readonly type: 'persist';
      readonly nodeId: NodeId;
      readonly entries: number;
      readonly durationMs: number;
    }
  | { readonly type: 'apply'; readonly nodeId: NodeId; readonly index: number; readonly entries: number }
  | { readonly type: 'snapshot'; readonly nodeId: NodeId; readonly index: number; readonly bytes: number }
  | { readonly type: 'snapshot-installed'; readonly nodeId: NodeId; readonly index: number }
  | {
      readonly type: 'storage-repaired';
      readonly nodeId: NodeId;
      readonly tornEntries: number;
      readonly strayKeys: number;
    }
  | {
      readonly type: 'membership';
      readonly nodeId: NodeId;
      readonly voters: NodeId[];
      readonly learners: NodeId[];
    }
  | { readonly type: 'removed'; readonly nodeId: NodeId }
  /** This leader proposed removing `voter`, silent for `silentMs` (`removeDeadVotersAfterMs`). */
  | {
      readonly type: 'dead-voter';
      readonly nodeId: NodeId;
      readonly voter: NodeId;
      readonly silentMs: number;
    }
  | { readonly type: 'error'; readonly nodeId: NodeId; readonly error: Error; readonly fatal: boolean };

export type ClusterEventType = ClusterEvent['type'];

const channels = new Map<string, diagnostics.Channel>();

function channel(type: string): diagnostics.Channel {
  let ch = channels.get(type);
  if (!ch) {
    ch = diagnostics.channel(`mocra:cluster:${type}`);
    channels.set(type, ch);
  }
  return ch;
}

/** Publish `event` on its diagnostics channel and hand it to `listener`. A throwing listener is ignored. */
export function publishEvent(
  event: ClusterEvent,
  listener: ((event: ClusterEvent) => void) | undefined,
): void {
  const ch = channel(event.type);
  if (ch.hasSubscribers) ch.publish(event);
  if (listener) {
    try {
      listener(event);
    } catch {
      // A metrics callback must never break the node.
    }
  }
}
