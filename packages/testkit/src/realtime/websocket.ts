/**
 * WebSocket endpoints: a stream of numbered JSON messages and an echo. @fastify/websocket is
 * registered in its own scope, so its per-request hooks cost nothing on the other routes.
 */
import fastifyWebsocket from '@fastify/websocket';
import type { RouteRegistrar } from '../site/context.js';
import { queryInt } from '../site/http.js';

/** One message of `/ws/stream`. */
export interface StreamMessage {
  /** 1-based position in the stream. */
  seq: number;
  /** Messages the stream sends in all. */
  count: number;
  /** `size` characters of filler (empty by default). */
  data: string;
}

export const MAX_STREAM_MESSAGES = 1_000_000;

export const registerWebSocketRoutes: RouteRegistrar = (app, ctx) => {
  app.register(async (scope) => {
    await scope.register(fastifyWebsocket, { options: { maxPayload: 1 << 20 } });
    scope.websocketServer.on('connection', (_ws, req) => ctx.upgraded.add(req));
    // The plugin starts a polite close handshake on shutdown; a client that never answers would
    // keep its socket (and the process) alive for 30 s, so cut every socket once that has begun.
    scope.addHook('preClose', (done) => {
      for (const client of scope.websocketServer.clients) client.terminate();
      done();
    });

    scope.get<{ Querystring: { count?: string; intervalMs?: string; size?: string; end?: string } }>(
      '/ws/stream',
      { websocket: true },
      (socket, req) => {
        const count = queryInt(req.query.count, 10, MAX_STREAM_MESSAGES);
        const interval = queryInt(req.query.intervalMs, 10, 60_000);
        const size = queryInt(req.query.size, 0, 1 << 20);
        const end = req.query.end ?? 'close';
        if (count < 0 || interval < 0 || size < 0 || !['close', 'drop', 'open'].includes(end)) {
          // 1008 = policy violation: the query asked for something this endpoint does not do.
          socket.close(
            1008,
            'bad query: count 0…1000000, intervalMs 0…60000, size 0…1048576, end close|drop|open',
          );
          return;
        }
        const data = 'x'.repeat(size);
        let seq = 0;
        let timer: NodeJS.Timeout | undefined;
        const finish = (): void => {
          if (end === 'close') socket.close(1000, 'done');
          else if (end === 'drop') socket.terminate();
        };
        const step = (): void => {
          if (socket.readyState !== socket.OPEN) return;
          if (interval === 0) {
            while (seq < count)
              socket.send(JSON.stringify({ seq: ++seq, count, data } satisfies StreamMessage));
            finish();
            return;
          }
          if (seq < count) socket.send(JSON.stringify({ seq: ++seq, count, data } satisfies StreamMessage));
          if (seq < count) timer = setTimeout(step, interval);
          else finish();
        };
        socket.on('close', () => clearTimeout(timer));
        step();
      },
    );

    scope.get('/ws/echo', { websocket: true }, (socket) => {
      socket.on('message', (data, isBinary) => {
        if (socket.readyState === socket.OPEN) socket.send(data, { binary: isBinary });
      });
    });
  });
};
