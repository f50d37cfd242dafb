import { describe, expect, test } from 'vitest';
import { createQueueBackend } from '../src/queue/create-queue-backend.js';
import { FakeKafkaBroker } from './fake-kafka-broker.js';

const REDIS_URL = process.env.MOCRA_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const NATS_URL = process.env.MOCRA_TEST_NATS_URL ?? 'nats://127.0.0.1:4222';

describe('createQueueBackend(url)', () => {
  test('memory://', async () => {
    const backend = await createQueueBackend('memory://', { namespace: 'factory' });
    expect(backend).toMatchObject({ kind: 'memory', namespace: 'factory' });
    await backend.close();
  });

  test('redis:// and nats:// connect to the local servers', async () => {
    const redis = await createQueueBackend(REDIS_URL, { namespace: 'factory' });
    expect(redis.kind).toBe('redis');
    await redis.close();
    const nats = await createQueueBackend(NATS_URL, { namespace: 'factory' });
    expect(nats.kind).toBe('nats');
    await nats.close();
  });

  test('kafka:// takes a broker list (here with a fake client injected)', async () => {
    const broker = new FakeKafkaBroker();
    const kafka = await createQueueBackend('kafka://k1:9092,k2:9093', { kafka: { kafka: broker.client() } });
    expect(kafka.kind).toBe('kafka');
    await kafka.close();
  });

  test.each([
    [''],
    ['   '],
    ['127.0.0.1:6379'],
    ['ftp://example.com'],
    ['leveldb://./data'],
    ['memory://somewhere'],
    ['redis://'],
    ['nats://'],
    ['nats://host:4222,http://x:1'],
    ['kafka://'],
    ['kafka://host'],
    ['kafka://host:9092,,host2:9092'],
  ])('%j is refused with MOCRA_ERR_BACKEND_URL', async (url) => {
    await expect(createQueueBackend(url)).rejects.toMatchObject({ code: 'MOCRA_ERR_BACKEND_URL' });
  });

  test('an unreachable server is MOCRA_ERR_BACKEND_UNAVAILABLE, not a hang or a crash', async () => {
    await expect(createQueueBackend('redis://127.0.0.1:1')).rejects.toMatchObject({
      code: 'MOCRA_ERR_BACKEND_UNAVAILABLE',
    });
    await expect(createQueueBackend('nats://127.0.0.1:1')).rejects.toMatchObject({
      code: 'MOCRA_ERR_BACKEND_UNAVAILABLE',
    });
  });

  test('bad names are refused before anything is created', async () => {
    await expect(createQueueBackend(REDIS_URL, { namespace: 'has.dot' })).rejects.toMatchObject({
      code: 'MOCRA_ERR_INVALID_ARGUMENT',
    });
    const backend = await createQueueBackend(NATS_URL, { namespace: 'factory' });
    expect(() => backend.topic('a>b')).toThrow(
      expect.objectContaining({ code: 'MOCRA_ERR_INVALID_ARGUMENT' }),
    );
    expect(() => backend.topic('t', { maxDeliveries: 0 })).toThrow(
      expect.objectContaining({ code: 'MOCRA_ERR_INVALID_ARGUMENT' }),
    );
    await backend.close();
  });
});
