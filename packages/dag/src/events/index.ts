export { DAG_CHANNELS } from './channels.js';
export type { MemoryEventSink } from './memory-event-sink.js';
export { createMemoryEventSink } from './memory-event-sink.js';
export type {
  DagEvent,
  DagEventType,
  DagNodeEvent,
  DagRunEvent,
  EventSink,
  NodeCancelledEvent,
  NodeFailedEvent,
  NodeReadyEvent,
  NodeRestoredEvent,
  NodeRetryScheduledEvent,
  NodeRunningEvent,
  NodeSingleflightWaitEvent,
  NodeState,
  NodeSucceededEvent,
  OutputSource,
  RunFailedEvent,
  RunGuardAcquiredEvent,
  RunGuardLostEvent,
  RunGuardReleasedEvent,
  RunGuardRenewedEvent,
  RunStartedEvent,
  RunSucceededEvent,
} from './types.js';
