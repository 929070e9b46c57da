// The logger as configured: JSON or readable lines, ISO times, secrets removed in both formats.
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import type { DestinationStream } from 'pino';
import type { LogFormat } from '../config/index.js';
import { createLogger, logFormatOf, RequestScope, requestLogger } from './logger.js';

function capture(format: LogFormat): { log: ReturnType<typeof createLogger>; text: () => string } {
  const chunks: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      chunks.push(String(chunk));
      done();
    },
  });
  const destination = sink as unknown as DestinationStream;
  return { log: createLogger({ level: 'info', format, requests: true }, { destination }), text: () => chunks.join('') };
}

const SECRETS = {
  password: 'pw-top-level',
  newPassword: 'pw-new',
  'overlay-session': 'sess-top-level',
  body: { password: 'pw-nested', token: 'tok-nested', code: '123456' },
  req: { headers: { authorization: 'Bearer bearer-nested', 'overlay-session': 'sess-header' } },
};

describe('logger', () => {
  it('writes JSON lines with ISO 8601 times and no secret', () => {
    const { log, text } = capture('json');
    log.info({ ...SECRETS, code: 'INVALID_AUTH' }, 'something happened');
    const line = JSON.parse(text().trim()) as Record<string, unknown>;
    expect(line.time).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(line.msg).toBe('something happened');
    // An error code at the top stays readable; a one-time code one level down does not.
    expect(line.code).toBe('INVALID_AUTH');
    for (const secret of ['pw-top-level', 'pw-new', 'pw-nested', 'tok-nested', '123456', 'sess-top-level', 'bearer-nested', 'sess-header']) {
      expect(text()).not.toContain(secret);
    }
    expect(text()).toContain('[redacted]');
  });

  it('writes one readable line per entry in the pretty format, redacted alike', () => {
    const { log, text } = capture('pretty');
    log.info({ ...SECRETS, requestId: 'req-1' }, 'GET /edge/management/v1/identities 200');
    const out = text();
    expect(out.trim().split('\n')).toHaveLength(1);
    expect(out).toMatch(/^\[\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\] INFO: GET \/edge\/management\/v1\/identities 200 /);
    expect(out).toContain('"requestId":"req-1"');
    for (const secret of ['pw-top-level', 'pw-new', 'pw-nested', 'tok-nested', '123456', 'sess-top-level', 'bearer-nested', 'sess-header']) {
      expect(out).not.toContain(secret);
    }
  });

  it('is readable on a terminal and JSON elsewhere, unless a format is configured', () => {
    expect(logFormatOf({ level: 'info', requests: true }, true)).toBe('pretty');
    expect(logFormatOf({ level: 'info', requests: true }, false)).toBe('json');
    expect(logFormatOf({ level: 'info', requests: true, format: 'json' }, true)).toBe('json');
    expect(logFormatOf({ level: 'info', requests: true, format: 'pretty' }, false)).toBe('pretty');
  });
});

describe('request scope', () => {
  it("adds the request's id to lines of the controller's logger written on its behalf, also after awaiting", async () => {
    const chunks: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        chunks.push(String(chunk));
        done();
      },
    });
    const scope = new RequestScope();
    const log = createLogger({ level: 'info', format: 'json', requests: true }, { destination: sink as unknown as DestinationStream, scope });
    await Promise.all(
      ['req-a', 'req-b'].map((id) =>
        scope.run(id, async () => {
          await new Promise((resolve) => setTimeout(resolve, id === 'req-a' ? 5 : 1));
          log.warn({ step: id }, 'inside');
        }),
      ),
    );
    log.info('outside');
    // The request's own logger binds the id itself; the scope does not add it twice.
    scope.run('req-c', () => requestLogger(log.child({ requestId: 'req-c' })).info('own'));
    const lines = chunks.join('').trim().split('\n');
    const parsed = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(parsed.map((l) => [l.msg, l.step, l.requestId])).toEqual([
      ['inside', 'req-b', 'req-b'],
      ['inside', 'req-a', 'req-a'],
      ['outside', undefined, undefined],
      ['own', undefined, 'req-c'],
    ]);
    expect(lines[3]!.match(/"requestId"/g)).toHaveLength(1);
  });
});
