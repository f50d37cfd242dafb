/**
 * The WebSocket downloader: long-lived connections with reconnect and backoff, their manager and
 * diagnostics channels.
 *
 * @module @mocra/core/websocket
 */
export type { BackoffOptions } from './backoff.js';
export { backoffDelay, resolveBackoff } from './backoff.js';
export type {
  WebSocketCloseCause,
  WebSocketCloseMessage,
  WebSocketOpenMessage,
  WebSocketReconnectMessage,
} from './channels.js';
export { WEBSOCKET_CHANNEL_NAMES, websocketChannels } from './channels.js';
export type {
  WebSocketCloseInfo,
  WebSocketConnectionOptions,
  WebSocketConnectionStats,
  WebSocketMessage,
  WebSocketReconnectOptions,
  WebSocketState,
} from './connection.js';
export { defaultShouldReconnect, WebSocketConnection } from './connection.js';
export type { WebSocketConnectOptions, WebSocketManagerOptions } from './manager.js';
export { createWebSocketManager, WebSocketManager } from './manager.js';
export type { WebSocketDownloaderOptions, WebSocketRequestOptions } from './websocket-downloader.js';
export {
  createWebSocketDownloader,
  parseWebSocketRequestOptions,
  WEBSOCKET_META_KEY,
  WebSocketDownloader,
  websocketRequest,
} from './websocket-downloader.js';
