// The test files of one mutation run (stryker.file.config.mjs): those named in MUTATION_TESTS.
import { defineConfig } from 'vitest/config';
import base from './vitest.config.js';

export default defineConfig({
  ...base,
  test: { ...base.test, include: (process.env.MUTATION_TESTS ?? '').split(',').filter(Boolean) },
});
