/**
 * `/openapi.json`: an OpenAPI 3.1 description generated from {@link API_ROUTES} and the zod
 * schemas in schemas.ts (JSON Schema 2020-12, which OpenAPI 3.1 uses as is).
 */
import { z } from 'zod';
import { MOCRA_VERSION } from '../downloader/version.js';
import { API_ERROR_STATUS } from './error-status.js';
import { API_ROUTES, type RouteSpec } from './routes.js';
import { apiSchemas, errorBodySchema } from './schemas.js';

type JsonSchema = Record<string, unknown>;

const REF = (id: string) => `#/components/schemas/${id}`;

const STATUS_TEXT: Readonly<Record<number, string>> = {
  200: 'OK',
  202: 'Accepted',
  400: 'Invalid request (MOCRA_ERR_API_VALIDATION; `issues` lists each problem)',
  401: 'No API key or a wrong one (MOCRA_ERR_API_UNAUTHORIZED)',
  403: 'No API key is configured (MOCRA_ERR_API_KEY_NOT_CONFIGURED)',
  404: 'Not found',
  409: 'The engine is not in a state that allows this (MOCRA_ERR_ENGINE_STATE)',
  413: 'Body too large (MOCRA_ERR_API_BODY_TOO_LARGE)',
  415: 'Body is not JSON (MOCRA_ERR_API_UNSUPPORTED_MEDIA_TYPE)',
  421: 'The Host header names a host this API does not serve (MOCRA_ERR_API_HOST_NOT_ALLOWED)',
  422: 'Unknown module (MOCRA_ERR_UNKNOWN_MODULE)',
  429: 'Rate limited (MOCRA_ERR_API_RATE_LIMITED); see Retry-After',
  500: 'Internal error (MOCRA_ERR_INTERNAL)',
  503: 'Unavailable (MOCRA_ERR_API_UNAVAILABLE, MOCRA_ERR_BACKEND_UNAVAILABLE)',
};

let cached: JsonSchema | undefined;

export function openApiDocument(): JsonSchema {
  cached ??= build();
  return cached;
}

function build(): JsonSchema {
  const { schemas } = z.toJSONSchema(apiSchemas, { uri: REF, unrepresentable: 'any' }) as {
    schemas: Record<string, JsonSchema>;
  };
  for (const schema of Object.values(schemas)) {
    delete schema.$schema;
    delete schema.$id;
  }
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of API_ROUTES) {
    paths[route.url] ??= {};
    (paths[route.url] as Record<string, unknown>)[route.method.toLowerCase()] = operation(route);
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'mocra control API',
      version: MOCRA_VERSION,
      description:
        'Read-only observability endpoints (no key; cross-origin reads for the origins in `[api] cors_origins`) and authenticated control endpoints. Requests for a host name the API does not serve answer 421. Every error is a JSON body `{ error: { code, message, status }, requestId }`; the codes are listed in docs/errors.md.',
      'x-error-status': API_ERROR_STATUS,
    },
    tags: [
      { name: 'observability', description: 'Read-only, no key, never rate-limited.' },
      { name: 'control', description: 'Needs the API key; mutating requests are rate-limited per key.' },
      { name: 'meta', description: 'The dashboard and this description.' },
    ],
    components: {
      schemas,
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', description: 'Authorization: Bearer <api key>' },
        apiKey: { type: 'apiKey', in: 'header', name: 'x-api-key' },
      },
    },
    paths,
  };
}

function operation(route: RouteSpec): Record<string, unknown> {
  const op: Record<string, unknown> = {
    operationId: route.id,
    summary: route.summary,
    tags: [route.tag],
    'x-rate-limited': route.rateLimited,
  };
  if (route.auth) op.security = [{ bearer: [] }, { apiKey: [] }];
  if (route.query !== undefined) op.parameters = queryParameters(route.query);
  if (route.body !== undefined) {
    op.requestBody = {
      required: true,
      content: { 'application/json': { schema: schemaOf(route.body, 'input') } },
    };
  }
  const responses: Record<string, unknown> = {};
  responses[String(route.status)] = {
    description: STATUS_TEXT[route.status] ?? 'OK',
    content: successContent(route),
  };
  // Any route answers 421 to a request for a host it does not serve.
  for (const status of new Set([...route.errors, 421, 500])) {
    responses[String(status)] = {
      description: STATUS_TEXT[status] ?? 'Error',
      content: { 'application/json': { schema: { $ref: REF(idOf(errorBodySchema) ?? 'Error') } } },
    };
  }
  op.responses = responses;
  return op;
}

function successContent(route: RouteSpec): Record<string, unknown> {
  if (route.contentType === 'text/html') return { 'text/html': { schema: { type: 'string' } } };
  if (route.contentType === 'text/plain') return { 'text/plain': { schema: { type: 'string' } } };
  if (route.response === undefined) return { 'application/json': { schema: { type: 'object' } } };
  const schema = schemaOf(route.response, 'output');
  return {
    'application/json': { schema: route.nullable === true ? { oneOf: [schema, { type: 'null' }] } : schema },
  };
}

function idOf(schema: z.ZodType): string | undefined {
  return apiSchemas.get(schema)?.id;
}

function schemaOf(schema: z.ZodType, io: 'input' | 'output'): JsonSchema {
  const id = idOf(schema);
  if (id !== undefined) return { $ref: REF(id) };
  // Unnamed schemas (query strings) hold no named ones, so inlining them needs no $defs.
  const json = z.toJSONSchema(schema, { io, unrepresentable: 'any' }) as JsonSchema;
  delete json.$schema;
  return json;
}

function queryParameters(schema: z.ZodType): unknown[] {
  const json = schemaOf(schema, 'input');
  const properties = (json.properties ?? {}) as Record<string, JsonSchema>;
  const required = new Set((json.required as string[] | undefined) ?? []);
  return Object.entries(properties).map(([name, property]) => ({
    name,
    in: 'query',
    required: required.has(name),
    schema: property,
  }));
}
