export type { ChannelEntry, ChannelSinkOptions } from './channel-sink.js';
export { ChannelSink, createChannelSink } from './channel-sink.js';
export type { FileSinkOptions } from './file-sink.js';
export { createCsvSink, createFileSink, FileSink } from './file-sink.js';
export type { JsonlSinkOptions } from './jsonl-sink.js';
export { createJsonlSink, JsonlSink } from './jsonl-sink.js';
export { onItem } from './on-item.js';
