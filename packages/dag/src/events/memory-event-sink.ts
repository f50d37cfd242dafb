import type { DagEvent, DagEventType, EventSink } from './types.js';

export interface MemoryEventSink extends EventSink {
  readonly events: readonly DagEvent[];
  /** Events of one type, typed. */
  ofType<T extends DagEventType>(type: T): Extract<DagEvent, { type: T }>[];
  clear(): void;
}

/** Keeps every event in an array; for tests, debugging and small runs. */
export function createMemoryEventSink(): MemoryEventSink {
  const events: DagEvent[] = [];
  return {
    events,
    emit(event) {
      events.push(event);
    },
    ofType<T extends DagEventType>(type: T) {
      return events.filter((e): e is Extract<DagEvent, { type: T }> => e.type === type);
    },
    clear() {
      events.length = 0;
    },
  };
}
