import pino from 'pino';
import { describe, expect, test } from 'vitest';
import { createBufferedLogger, createLogBuffer, logsDisabled } from './log-buffer.js';

function loggerInto(buffer: ReturnType<typeof createLogBuffer>, level: pino.Level = 'trace'): pino.Logger {
  return pino({ name: 'mocra', level }, pino.multistream([{ stream: buffer.destination, level }]));
}

describe('LogBuffer', () => {
  test('keeps pino records newest first with their ids, error code and stack', () => {
    const buffer = createLogBuffer({ disabled: false });
    const log = loggerInto(buffer);
    log.info({ module: 'engine', runId: 'r1' }, 'run started');
    log
      .child({ component: 'downloader' })
      .warn({ requestId: 'q1', url: 'http://a.test/x', status: 503 }, 'retrying');
    const err = Object.assign(new Error('boom'), { code: 'MOCRA_ERR_PARSE_FAILED' });
    log.error({ module: 'engine:parse', err, taskId: 't1', attempt: 2, extra: 'kept' }, 'parse failed');

    const records = buffer.query();
    expect(records.map((r) => r.message)).toEqual(['parse failed', 'retrying', 'run started']);
    const [failed, retrying, started] = records;
    expect(failed).toMatchObject({
      level: 'error',
      module: 'engine:parse',
      taskId: 't1',
      attempt: 2,
      code: 'MOCRA_ERR_PARSE_FAILED',
    });
    expect(failed?.traceback).toContain('Error: boom');
    expect(failed?.fields).toEqual({ extra: 'kept' });
    expect(retrying).toMatchObject({
      level: 'warn',
      module: 'downloader',
      requestId: 'q1',
      url: 'http://a.test/x',
      status: 503,
    });
    expect(started).toMatchObject({ level: 'info', module: 'engine', runId: 'r1' });
    expect(records[0]!.seq).toBeGreaterThan(records[1]!.seq);
  });

  test('filters by minimum level, module text and sequence, and caps the limit', () => {
    const buffer = createLogBuffer({ disabled: false });
    const log = loggerInto(buffer);
    for (let i = 0; i < 5; i++) log.debug({ module: 'frontier' }, `d${i}`);
    log.info({ module: 'engine' }, 'i0');
    log.warn({ module: 'Downloader' }, 'w0');
    log.error({ module: 'engine' }, 'e0');

    expect(buffer.query({ level: 'warn' }).map((r) => r.message)).toEqual(['e0', 'w0']);
    expect(buffer.query({ module: 'DOWN' }).map((r) => r.message)).toEqual(['w0']);
    expect(buffer.query({ level: 'info', module: 'engine' }).map((r) => r.message)).toEqual(['e0', 'i0']);
    expect(buffer.query({ limit: 2 }).map((r) => r.message)).toEqual(['e0', 'w0']);
    const mark = buffer.query({ limit: 1 })[0]!.seq;
    log.info('later');
    expect(buffer.query({ after: mark }).map((r) => r.message)).toEqual(['later']);
  });

  test('is a bounded ring: the oldest records are overwritten', () => {
    const buffer = createLogBuffer({ capacity: 3, disabled: false });
    const log = loggerInto(buffer);
    for (let i = 0; i < 10; i++) log.info(`m${i}`);
    expect(buffer.size).toBe(3);
    expect(buffer.query({ limit: 100 }).map((r) => r.message)).toEqual(['m9', 'm8', 'm7']);
    expect(buffer.lastSeq).toBe(10);
  });

  test('cuts long messages and counts lines it cannot read', () => {
    const dropped: string[] = [];
    const levels: string[] = [];
    const buffer = createLogBuffer({
      disabled: false,
      maxMessageLength: 10,
      onDrop: (r) => dropped.push(r),
      onRecord: (l) => levels.push(l),
    });
    buffer.write('not json\n{"level":"nope","msg":"x"}\n');
    buffer.write(`${JSON.stringify({ level: 30, time: 1, msg: 'x'.repeat(50) })}\n`);
    expect(dropped).toEqual(['invalid', 'invalid']);
    expect(levels).toEqual(['info']);
    expect(buffer.query()[0]!.message).toBe(`${'x'.repeat(10)}…`);
  });

  test('MOCRA_DISABLE_LOGS turns it off', () => {
    expect(logsDisabled({ MOCRA_DISABLE_LOGS: '1' })).toBe(true);
    expect(logsDisabled({ MOCRA_DISABLE_LOGS: 'true' })).toBe(true);
    expect(logsDisabled({ MOCRA_DISABLE_LOGS: '0' })).toBe(false);
    expect(logsDisabled({ MOCRA_DISABLE_LOGS: 'false' })).toBe(false);
    expect(logsDisabled({})).toBe(false);

    const before = process.env.MOCRA_DISABLE_LOGS;
    process.env.MOCRA_DISABLE_LOGS = '1';
    try {
      const buffer = createLogBuffer();
      expect(buffer.disabled).toBe(true);
      loggerInto(buffer).error('dropped');
      expect(buffer.size).toBe(0);
    } finally {
      if (before === undefined) delete process.env.MOCRA_DISABLE_LOGS;
      else process.env.MOCRA_DISABLE_LOGS = before;
    }
  });

  test('rejects a capacity that is not a positive integer', () => {
    expect(() => createLogBuffer({ capacity: 0 })).toThrow(
      expect.objectContaining({ code: 'MOCRA_ERR_INVALID_ARGUMENT' }),
    );
  });

  test('createBufferedLogger feeds the ring at its own level, whatever the stderr level', () => {
    const buffer = createLogBuffer({ disabled: false });
    // Under the test runner stderr resolves to 'silent'; the ring still records from 'info'.
    const log = createBufferedLogger({ buffer, bufferLevel: 'info' });
    log.debug('not kept');
    log.info({ module: 'engine' }, 'kept');
    expect(buffer.query().map((r) => r.message)).toEqual(['kept']);
    expect(log.isLevelEnabled('debug')).toBe(false);
    const off = createBufferedLogger({ buffer: createLogBuffer({ disabled: true }) });
    expect(off.level).toBe('silent');
  });
});
