/**
 * `startEngineApi` as the package root exports it: the control API (fastify, its schemas, the
 * metrics registry, the dashboard) loads on this first call, so a crawl that never serves it
 * never loads it. `@mocra/core/api` exports the same function and the rest of the API.
 */
import type { Engine } from '../engine/engine.js';
import type { EngineApi, EngineApiOptions } from './engine-api.js';

export async function startEngineApi(engine: Engine, options: EngineApiOptions = {}): Promise<EngineApi> {
  const api = await import('./engine-api.js');
  return api.startEngineApi(engine, options);
}
