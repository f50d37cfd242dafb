/**
 * Every endpoint of the control API, as data: the server registers exactly these routes and
 * `/openapi.json` describes exactly these (a test walks the list against a running server).
 *
 * - `auth`: needs the API key (`Authorization: Bearer <key>` or `x-api-key`).
 * - `rateLimited`: counts against the per-key rate limit. Only mutating requests do; reads —
 *   everything the dashboard polls — never do, so the limit cannot throttle the dashboard.
 */
import type { z } from 'zod';
import {
  clusterViewSchema,
  dlqListQuerySchema,
  dlqPageSchema,
  dlqPurgeQuerySchema,
  dlqReplayBodySchema,
  dlqResultSchema,
  engineViewSchema,
  healthViewSchema,
  historyViewSchema,
  hostsViewSchema,
  logsQuerySchema,
  logsViewSchema,
  nodesViewSchema,
  pauseViewSchema,
  queuesViewSchema,
  startWorkBodySchema,
  startWorkResultSchema,
  stopViewSchema,
  systemViewSchema,
} from './schemas.js';

export type RouteId =
  | 'dashboard'
  | 'openapi'
  | 'health'
  | 'metrics'
  | 'engine'
  | 'cluster'
  | 'system'
  | 'history'
  | 'logs'
  | 'hosts'
  | 'queues'
  | 'startWork'
  | 'pause'
  | 'resume'
  | 'stop'
  | 'nodes'
  | 'dlqList'
  | 'dlqReplay'
  | 'dlqPurge';

export interface RouteSpec {
  id: RouteId;
  method: 'GET' | 'POST' | 'DELETE';
  url: string;
  summary: string;
  tag: 'observability' | 'control' | 'meta';
  auth: boolean;
  rateLimited: boolean;
  query?: z.ZodType;
  body?: z.ZodType;
  /** JSON response schema; absent for HTML / text responses. */
  response?: z.ZodType;
  /** The success status. */
  status: number;
  contentType: 'application/json' | 'text/html' | 'text/plain';
  /** Nullable JSON response (cluster view in single-node mode). */
  nullable?: boolean;
  /** Statuses other than the success one this route can answer with (besides 500). */
  errors: readonly number[];
}

const READ_ERRORS = [503] as const;
const AUTH_ERRORS = [401, 403, 503] as const;
const WRITE_ERRORS = [400, 401, 403, 413, 415, 429, 503] as const;

export const API_ROUTES: readonly RouteSpec[] = [
  {
    id: 'dashboard',
    method: 'GET',
    url: '/',
    summary: 'The built-in dashboard (one HTML page polling the read-only endpoints of its own origin).',
    tag: 'meta',
    auth: false,
    rateLimited: false,
    status: 200,
    contentType: 'text/html',
    errors: [],
  },
  {
    id: 'openapi',
    method: 'GET',
    url: '/openapi.json',
    summary: 'This description (OpenAPI 3.1).',
    tag: 'meta',
    auth: false,
    rateLimited: false,
    status: 200,
    contentType: 'application/json',
    errors: [],
  },
  {
    id: 'health',
    method: 'GET',
    url: '/health',
    summary: 'Component health: 200 when up or degraded, 503 when down.',
    tag: 'observability',
    auth: false,
    rateLimited: false,
    response: healthViewSchema,
    status: 200,
    contentType: 'application/json',
    errors: [503],
  },
  {
    id: 'metrics',
    method: 'GET',
    url: '/metrics',
    summary: 'Prometheus text exposition of the mocra_* families and the process metrics.',
    tag: 'observability',
    auth: false,
    rateLimited: false,
    status: 200,
    contentType: 'text/plain',
    errors: READ_ERRORS,
  },
  {
    id: 'engine',
    method: 'GET',
    url: '/observability/engine',
    summary: 'Engine state, mode, per-stage counts, throughput and latency percentiles.',
    tag: 'observability',
    auth: false,
    rateLimited: false,
    response: engineViewSchema,
    status: 200,
    contentType: 'application/json',
    errors: READ_ERRORS,
  },
  {
    id: 'cluster',
    method: 'GET',
    url: '/observability/cluster',
    summary: 'The cluster as this node sees it; null in single-node mode.',
    tag: 'observability',
    auth: false,
    rateLimited: false,
    response: clusterViewSchema,
    nullable: true,
    status: 200,
    contentType: 'application/json',
    errors: READ_ERRORS,
  },
  {
    id: 'system',
    method: 'GET',
    url: '/observability/system',
    summary: 'Host CPU, memory and swap, and this process (CPU, RSS, heap).',
    tag: 'observability',
    auth: false,
    rateLimited: false,
    response: systemViewSchema,
    status: 200,
    contentType: 'application/json',
    errors: [],
  },
  {
    id: 'history',
    method: 'GET',
    url: '/observability/history',
    summary: 'Pages, items, errors and bytes per second over the last minutes, sampled on the server.',
    tag: 'observability',
    auth: false,
    rateLimited: false,
    response: historyViewSchema,
    status: 200,
    contentType: 'application/json',
    errors: READ_ERRORS,
  },
  {
    id: 'logs',
    method: 'GET',
    url: '/observability/logs',
    summary:
      'Recent log records, newest first, filtered by level (at least), module (contains) and sequence.',
    tag: 'observability',
    auth: false,
    rateLimited: false,
    query: logsQuerySchema,
    response: logsViewSchema,
    status: 200,
    contentType: 'application/json',
    errors: [400, 503],
  },
  {
    id: 'hosts',
    method: 'GET',
    url: '/observability/hosts',
    summary: 'Per-host politeness state: in flight, requests, errors, delay, backoff, breaker.',
    tag: 'observability',
    auth: false,
    rateLimited: false,
    response: hostsViewSchema,
    status: 200,
    contentType: 'application/json',
    errors: READ_ERRORS,
  },
  {
    id: 'queues',
    method: 'GET',
    url: '/observability/queues',
    summary: 'Every stage topic: ready, delayed, leased and dead-lettered messages.',
    tag: 'observability',
    auth: false,
    rateLimited: false,
    response: queuesViewSchema,
    status: 200,
    contentType: 'application/json',
    errors: READ_ERRORS,
  },
  {
    id: 'startWork',
    method: 'POST',
    url: '/start_work',
    summary: 'Put a task on the task topic: a run of a registered module (422 for an unknown module).',
    tag: 'control',
    auth: true,
    rateLimited: true,
    body: startWorkBodySchema,
    response: startWorkResultSchema,
    status: 202,
    contentType: 'application/json',
    errors: [...WRITE_ERRORS, 409, 422],
  },
  {
    id: 'pause',
    method: 'POST',
    url: '/control/pause',
    summary:
      'Stop taking new work (cluster-wide with a shared coordination backend); work in flight finishes.',
    tag: 'control',
    auth: true,
    rateLimited: true,
    response: pauseViewSchema,
    status: 200,
    contentType: 'application/json',
    errors: [...WRITE_ERRORS, 409],
  },
  {
    id: 'resume',
    method: 'POST',
    url: '/control/resume',
    summary: 'Take new work again after a pause.',
    tag: 'control',
    auth: true,
    rateLimited: true,
    response: pauseViewSchema,
    status: 200,
    contentType: 'application/json',
    errors: [...WRITE_ERRORS, 409],
  },
  {
    id: 'stop',
    method: 'POST',
    url: '/control/stop',
    summary:
      'Stop this node gracefully: no new work is taken, work in flight finishes (the rest goes back to the queue), the run ends with reason stopped.',
    tag: 'control',
    auth: true,
    rateLimited: true,
    response: stopViewSchema,
    status: 202,
    contentType: 'application/json',
    errors: [...WRITE_ERRORS, 409],
  },
  {
    id: 'nodes',
    method: 'GET',
    url: '/nodes',
    summary: 'Members known to the coordination backend (just this node when single-node).',
    tag: 'control',
    auth: true,
    rateLimited: false,
    response: nodesViewSchema,
    status: 200,
    contentType: 'application/json',
    errors: AUTH_ERRORS,
  },
  {
    id: 'dlqList',
    method: 'GET',
    url: '/dlq',
    summary: 'Dead letters of every stage topic (or one), oldest first, with counts per topic.',
    tag: 'control',
    auth: true,
    rateLimited: false,
    query: dlqListQuerySchema,
    response: dlqPageSchema,
    status: 200,
    contentType: 'application/json',
    errors: [400, ...AUTH_ERRORS],
  },
  {
    id: 'dlqReplay',
    method: 'POST',
    url: '/dlq/replay',
    summary: 'Publish the selected dead letters to their topic again (attempts start over).',
    tag: 'control',
    auth: true,
    rateLimited: true,
    body: dlqReplayBodySchema,
    response: dlqResultSchema,
    status: 200,
    contentType: 'application/json',
    errors: WRITE_ERRORS,
  },
  {
    id: 'dlqPurge',
    method: 'DELETE',
    url: '/dlq',
    summary: 'Remove the selected dead letters for good (selection in the query string).',
    tag: 'control',
    auth: true,
    rateLimited: true,
    query: dlqPurgeQuerySchema,
    response: dlqResultSchema,
    status: 200,
    contentType: 'application/json',
    errors: WRITE_ERRORS,
  },
];
