// Refuses a start on a Node.js line the controller does not support, in one line, before anything
// native (better-sqlite3) is loaded: main.ts imports this module first.
export const SUPPORTED_NODE = '>=22 (22, 24 or 26)';

/** The one-line refusal for this Node.js version, or undefined when it is supported. */
export function unsupportedNodeMessage(version: string): string | undefined {
  const major = Number(version.replace(/^v/, '').split('.')[0]);
  if (Number.isInteger(major) && major >= 22) return undefined;
  return `overlay: Node.js ${version} is not supported; it needs Node.js ${SUPPORTED_NODE}`;
}

const refusal = unsupportedNodeMessage(process.versions.node);
if (refusal !== undefined) {
  process.stderr.write(`${refusal}\n`);
  process.exit(1);
}
