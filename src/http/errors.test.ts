import { describe, expect, it } from 'vitest';
import { toApiError } from './errors.js';

/** An error as better-sqlite3 throws it: a message and SQLite's extended code. */
function sqliteError(code: string, message: string): Error {
  return Object.assign(new Error(message), { code });
}

describe('toApiError', () => {
  it('answers a write the disk refused as 503 saying why, not as an unexplained 500', () => {
    const full = toApiError(sqliteError('SQLITE_FULL', 'database or disk is full'));
    expect(full.code).toBe('SERVICE_UNAVAILABLE');
    expect(full.message).toMatch(/file system is full/);
    expect(toApiError(sqliteError('SQLITE_IOERR_WRITE', 'disk I/O error')).message).toMatch(/I\/O error/);
    expect(toApiError(sqliteError('SQLITE_READONLY', 'attempt to write a readonly database')).message).toMatch(/read-only/);
    expect(toApiError(sqliteError('SQLITE_READONLY_DBMOVED', 'attempt to write a readonly database')).message).toMatch(/moved or removed/);
  });

  it('leaves other SQLite errors unexplained: they are the controller\'s own faults', () => {
    expect(toApiError(sqliteError('SQLITE_ERROR', 'no such table: x')).code).toBe('UNHANDLED');
    expect(toApiError(sqliteError('SQLITE_CONSTRAINT_UNIQUE', 'UNIQUE constraint failed')).code).toBe('UNHANDLED');
  });
});
