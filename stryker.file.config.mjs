// One file's mutation score against the test files that exercise it (a lower bound on its score in a
// whole run, and minutes instead of hours):
//   MUTATION_TESTS=test/lockout.test.ts,src/auth/lockout.test.ts \
//     npx stryker run stryker.file.config.mjs --mutate src/auth/lockout.ts
// Not incremental; the JSON report goes to reports/mutation/file.json.
import base from './stryker.config.mjs';

export default {
  ...base,
  vitest: { configFile: 'vitest.mutation.config.ts' },
  incremental: false,
  reporters: ['clear-text', 'progress', 'json'],
  jsonReporter: { fileName: 'reports/mutation/file.json' },
};
