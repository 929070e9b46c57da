// What the version record says of this build. `npm run build` writes dist/build-info.json; a
// checkout run without it reports the package version and "unknown" for the rest.
import { readFileSync } from 'node:fs';

export interface BuildInfo {
  version: string;
  revision: string;
  buildDate: string;
  runtimeVersion: string;
}

function readJson(url: URL): Record<string, unknown> | undefined {
  try {
    return JSON.parse(readFileSync(url, 'utf8')) as Record<string, unknown>;
  } catch {
    return undefined;
  }
}

export function loadBuildInfo(): BuildInfo {
  // Works from src/ (tests) and from dist/src/ (built).
  const pkg =
    readJson(new URL('../package.json', import.meta.url)) ?? readJson(new URL('../../package.json', import.meta.url));
  const built = readJson(new URL('../build-info.json', import.meta.url));
  return {
    version: String(pkg?.version ?? '0.0.0'),
    revision: String(built?.revision ?? 'unknown'),
    buildDate: String(built?.buildDate ?? 'unknown'),
    runtimeVersion: process.version,
  };
}
