export {
  decodePayload,
  decodePayloadMap,
  encodePayload,
  encodePayloadMap,
  PAYLOAD_ENVELOPE_VERSION,
  PAYLOAD_MAP_VERSION,
} from './envelope.js';
export type { Payload, PayloadOptions } from './payload.js';
export {
  createPayload,
  EMPTY_PAYLOAD,
  isJsonContentType,
  isPayload,
  JSON_CONTENT_TYPE,
  jsonPayload,
  OCTET_STREAM,
  readJson,
  readText,
  TEXT_CONTENT_TYPE,
  textPayload,
} from './payload.js';
