/**
 * `node:diagnostics_channel` channels. Subscribers see the same event objects as an
 * {@link EventSink}, without configuring the scheduler; publishing costs nothing when nobody
 * subscribes.
 *
 * - `mocra:dag:run` — every {@link DagRunEvent}
 * - `mocra:dag:node` — every {@link DagNodeEvent}
 * - `mocra:dag:sink-error` — `{ error, event }` when an event sink throws or rejects
 * - `mocra:dag:store-error` — `{ error, runId, operation }` for store failures that do not fail
 *   the run (clearing a checkpoint after success, releasing the run guard, abandoning a claim)
 */
import { channel } from 'node:diagnostics_channel';

export const DAG_CHANNELS = Object.freeze({
  run: 'mocra:dag:run',
  node: 'mocra:dag:node',
  sinkError: 'mocra:dag:sink-error',
  storeError: 'mocra:dag:store-error',
});

export const runChannel = channel(DAG_CHANNELS.run);
export const nodeChannel = channel(DAG_CHANNELS.node);
export const sinkErrorChannel = channel(DAG_CHANNELS.sinkError);
export const storeErrorChannel = channel(DAG_CHANNELS.storeError);
