/**
 * Diagnostics channels of the WebSocket connection manager (`mocra:websocket:<event>`). They
 * cost nothing without subscribers.
 */
import diagnostics_channel from 'node:diagnostics_channel';

/** `mocra:websocket:open` — a socket finished its opening handshake. */
export interface WebSocketOpenMessage {
  key: string;
  url: string;
  /** 1 for the first socket of the connection, 2 after the first reconnect, … */
  generation: number;
  reconnect: boolean;
}

/** `mocra:websocket:reconnect` — a socket was lost (or failed to open); another is tried after `delayMs`. */
export interface WebSocketReconnectMessage {
  key: string;
  url: string;
  /** Attempt number in the current streak (1-based). */
  attempt: number;
  delayMs: number;
  /** Close code of the socket that was lost (1006 for an abnormal close or a failed handshake). */
  code: number;
}

/** `mocra:websocket:close` — a connection closed for good. */
export interface WebSocketCloseMessage {
  key: string;
  url: string;
  code: number;
  reason: string;
  by: WebSocketCloseCause;
  /** The error the connection ended with, when it did not end cleanly. */
  error?: Error;
}

/**
 * Who ended a connection: the server (a close frame or a lost socket), the client (`close()`),
 * the idle timer, or the client because of an error (overflow, a throwing `onOpen`).
 */
export type WebSocketCloseCause = 'server' | 'client' | 'idle' | 'error';

export const WEBSOCKET_CHANNEL_NAMES = {
  open: 'mocra:websocket:open',
  reconnect: 'mocra:websocket:reconnect',
  close: 'mocra:websocket:close',
} as const;

export const websocketChannels = {
  open: diagnostics_channel.channel(WEBSOCKET_CHANNEL_NAMES.open),
  reconnect: diagnostics_channel.channel(WEBSOCKET_CHANNEL_NAMES.reconnect),
  close: diagnostics_channel.channel(WEBSOCKET_CHANNEL_NAMES.close),
} as const;
