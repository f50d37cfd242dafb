import { nodeChannel, runChannel, sinkErrorChannel } from './channels.js';
import type { DagEvent, DagNodeEvent, DagRunEvent, EventSink } from './types.js';

/** Publishes a run event on its channel and hands it to the sink. */
export function emitRunEvent(sink: EventSink | undefined, event: DagRunEvent): void {
  if (runChannel.hasSubscribers) runChannel.publish(event);
  if (sink !== undefined) deliver(sink, event);
}

/** Publishes a node event on its channel and hands it to the sink. */
export function emitNodeEvent(sink: EventSink | undefined, event: DagNodeEvent): void {
  if (nodeChannel.hasSubscribers) nodeChannel.publish(event);
  if (sink !== undefined) deliver(sink, event);
}

/** A sink's failure (thrown or rejected) goes to `mocra:dag:sink-error`, never into the run. */
function deliver(sink: EventSink, event: DagEvent): void {
  try {
    const r = sink.emit(event);
    if (r !== undefined && typeof (r as Promise<void>).then === 'function') {
      (r as Promise<void>).then(undefined, (error: unknown) => sinkError(error, event));
    }
  } catch (error) {
    sinkError(error, event);
  }
}

function sinkError(error: unknown, event: DagEvent): void {
  if (sinkErrorChannel.hasSubscribers) sinkErrorChannel.publish({ error, event });
}
