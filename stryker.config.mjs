// `npm run mutation`: mutation testing of the security-relevant folders (auth, oidc, policy, query).
// Incremental: a run re-tests only mutants in changed code or covered by changed tests, reading and
// writing reports/mutation/incremental.json (committed, so the next run starts from it). A whole run:
// `npm run mutation -- --force`. Scores are recorded in the README.
/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  packageManager: 'npm',
  testRunner: 'vitest',
  vitest: { configFile: 'vitest.config.ts' },
  plugins: ['@stryker-mutator/vitest-runner'],
  mutate: [
    'src/auth/**/*.ts',
    'src/oidc/**/*.ts',
    'src/policy/**/*.ts',
    'src/query/**/*.ts',
    '!src/**/*.test.ts',
    '!src/**/*.test-support.ts',
  ],
  // Not needed by the tests, and large (the local Node.js install may be a symlink, which the
  // sandbox copy cannot take).
  ignorePatterns: ['/.node', '/dist', '/coverage', '/overlay-data', '/bench/data'],
  coverageAnalysis: 'perTest',
  // Mutants in module-level code would run the whole suite each; they are left out.
  ignoreStatic: true,
  incremental: true,
  incrementalFile: 'reports/mutation/incremental.json',
  reporters: ['clear-text', 'progress', 'html', 'json'],
  htmlReporter: { fileName: 'reports/mutation/mutation.html' },
  jsonReporter: { fileName: 'reports/mutation/mutation.json' },
  thresholds: { high: 90, low: 85, break: null },
  concurrency: 2,
  timeoutMS: 30_000,
  // The first run is the whole suite with per-test coverage: minutes, more on a loaded machine.
  dryRunTimeoutMinutes: 60,
  tempDirName: '.stryker-tmp',
  cleanTempDir: 'always',
};
