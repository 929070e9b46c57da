// Durations are written like Go durations: a sequence of decimal numbers, each followed by a unit,
// e.g. "500ms", "90s", "30m", "1h30m", "1.5h". Units: ms, s, m, h. A unit is always required (a
// bare "1800" is ambiguous between seconds and milliseconds, so it is refused), negative values are
// refused, and the result must be a whole number of milliseconds.

const UNIT_MS: Readonly<Record<string, number>> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 };
const MAX_TEXT_LENGTH = 64;
// Number then unit; "ms" is tried before "m". Anything else at a position is an error.
const TERM = /(\d+(?:\.\d*)?|\.\d+)([a-zA-Zµ]*)/y;

export function parseDuration(text: string): number {
  if (typeof text !== 'string') throw new Error('a duration must be a string such as "30m"');
  const shown = JSON.stringify(text.length > MAX_TEXT_LENGTH ? `${text.slice(0, MAX_TEXT_LENGTH)}…` : text);
  const fail = (reason: string): never => {
    throw new Error(`invalid duration ${shown}: ${reason}`);
  };
  if (text.length === 0) fail('empty');
  if (text.length > MAX_TEXT_LENGTH) fail(`longer than ${MAX_TEXT_LENGTH} characters`);
  if (/^[+-]?(\d+(\.\d*)?|\.\d+)$/.test(text)) fail(`a unit is required (ms, s, m or h), e.g. "${text}s"`);
  if (text.startsWith('-')) fail('must not be negative');

  let total = 0;
  let pos = 0;
  while (pos < text.length) {
    TERM.lastIndex = pos;
    const m = TERM.exec(text);
    if (!m) return fail(`unexpected ${JSON.stringify(text.slice(pos, pos + 1))} at position ${pos + 1}; write e.g. "1h30m"`);
    const [, number = '', unit = ''] = m;
    if (unit === '') return fail(`a unit is required after ${number} (ms, s, m or h)`);
    const factor = UNIT_MS[unit];
    if (factor === undefined) {
      if (unit === 'd') return fail('days are not a unit; use hours, e.g. "24h"');
      return fail(`unknown unit "${unit}" (use ms, s, m or h)`);
    }
    total += Number(number) * factor;
    pos = TERM.lastIndex;
  }
  const rounded = Math.round(total);
  if (Math.abs(total - rounded) > 1e-6) fail('must be a whole number of milliseconds');
  if (!Number.isSafeInteger(rounded)) fail('too large');
  return rounded;
}

/** Renders milliseconds the way parseDuration reads them: 5400000 → "1h30m", 1500 → "1s500ms", 0 → "0s". */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms)) throw new RangeError(`not a finite duration: ${ms}`);
  let rest = Math.round(Math.abs(ms));
  if (rest === 0) return '0s';
  let out = ms < 0 ? '-' : '';
  for (const [unit, factor] of [['h', 3_600_000], ['m', 60_000], ['s', 1_000], ['ms', 1]] as const) {
    const n = Math.floor(rest / factor);
    if (n > 0) out += `${n}${unit}`;
    rest -= n * factor;
  }
  return out;
}
