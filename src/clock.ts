// Time is injected everywhere it matters, so tests can move it.
export type Clock = () => number;

export const systemClock: Clock = () => Date.now();

/** RFC 3339 UTC with milliseconds, the one date format of every answer and of the store. */
export function iso(ms: number): string {
  // A request stamps several values with a few instants (now, an expiry): toISOString costs about a
  // microsecond each, so the text of the last two seconds is kept and only the milliseconds written.
  // Beyond the range of a date the built-in throws, as it should.
  if (!(Math.abs(ms) <= MAX_TIME)) return new Date(ms).toISOString();
  const whole = Math.trunc(ms);
  const second = Math.floor(whole / 1000);
  let prefix: string;
  if (second === keptSeconds[0]) prefix = keptPrefixes[0];
  else if (second === keptSeconds[1]) prefix = keptPrefixes[1];
  else {
    // "…T03:04:05." of the second: the text before the milliseconds, whatever the year's width.
    prefix = new Date(second * 1000).toISOString().slice(0, -4);
    keptSeconds[older] = second;
    keptPrefixes[older] = prefix;
    older = older === 0 ? 1 : 0;
  }
  return prefix + MILLIS[whole - second * 1000] + 'Z';
}

/** The largest time a Date holds, either side of 1970 (ECMA-262 TimeClip). */
const MAX_TIME = 8.64e15;
const MILLIS = Array.from({ length: 1000 }, (_, i) => String(i).padStart(3, '0'));
/** The two seconds whose text is kept, and which of them goes first. */
const keptSeconds: [number, number] = [NaN, NaN];
const keptPrefixes: [string, string] = ['', ''];
let older: 0 | 1 = 0;
