import { describe, expect, it } from 'vitest';
import { unsupportedNodeMessage } from './node-version.js';

describe('unsupportedNodeMessage', () => {
  it.each([
    ['22.0.0', undefined],
    ['22.23.3', undefined],
    ['v24.21.0', undefined],
    ['26.10.0', undefined],
  ])('accepts %s', (version, expected) => {
    expect(unsupportedNodeMessage(version)).toBe(expected);
  });

  it.each(['20.20.2', '18.19.0', 'v21.7.3', 'garbage'])('refuses %s in one line naming the version it needs', (version) => {
    const message = unsupportedNodeMessage(version);
    expect(message).toContain(`Node.js ${version} is not supported`);
    expect(message).toContain('>=22');
    expect(message).not.toContain('\n');
  });
});
