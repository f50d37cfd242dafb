export type { CharsetSource, DetectedCharset } from './charset.js';
export { decodeText, detectCharset, normalizeCharset } from './charset.js';
export type { ErrorEvent, FollowUpTask, StageName, TaskEvent, TopicName } from './events.js';
export { ATTEMPT_HEADER, STAGE_TOPICS, TOPICS } from './events.js';
export type { DataSink, ItemMeta } from './item.js';
export type { ProxyChoice, RequestBody, RequestData, RequestInit } from './request.js';
export { Request } from './request.js';
export type { FieldValue, RequestEncodingInit } from './request-encoding.js';
export type {
  BrowserResponseData,
  RedirectHop,
  ResponseData,
  ResponseHeaders,
  ResponseInit,
  TextOptions,
} from './response.js';
export { BrowserResponse, Response } from './response.js';
