import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';

/** One no-restricted-imports rule per layer: the folders it may not import, and the packages. */
function layers(rules) {
  const folders = (names) => `^(\\.\\./)+(${names.join('|')})/`;
  return rules.map(({ files, deny, typesOnly = [], packages }) => ({
    files: files.map((f) => `${f}/*.ts`),
    ignores: ['src/**/*.test.ts', 'src/**/*.test-support.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: packages.map((name) => ({ name, message: 'this layer does not use this package (DESIGN.md, Layout)' })),
          patterns: [
            ...(deny.length > 0 ? [{ regex: folders(deny), message: 'a layer imports only the layers below it (DESIGN.md, Layout)' }] : []),
            ...(typesOnly.length > 0
              ? [{ regex: folders(typesOnly), allowTypeImports: true, message: 'this layer takes only types from there (DESIGN.md, Layout)' }]
              : []),
          ],
        },
      ],
    },
  }));
}

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', '.node/', '.stryker-tmp/', 'reports/', 'overlay-data/', 'bench/data/', 'coverage/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { ...globals.node } },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
      'no-console': 'error',
    },
  },
  // The layers (DESIGN.md, Layout): a folder imports only what sits below it; app/ is the one
  // composition root. Tests may import anything.
  ...layers([
    // pure: no I/O of their own
    { files: ['src/query/**', 'src/resources/**', 'src/pki/**', 'src/config/**'], deny: ['kernel', 'store', 'policy', 'auth', 'oidc', 'domain', 'core', 'http', 'app'], packages: ['better-sqlite3', 'fastify', 'pino'] },
    { files: ['src/store/**'], deny: ['kernel', 'policy', 'auth', 'oidc', 'domain', 'core', 'http', 'app'], packages: ['fastify'] },
    { files: ['src/kernel/**'], deny: ['policy', 'auth', 'oidc', 'domain', 'core', 'http', 'app'], packages: ['better-sqlite3', 'fastify'] },
    { files: ['src/policy/**'], deny: ['auth', 'oidc', 'domain', 'core', 'http', 'app'], packages: ['better-sqlite3', 'fastify'] },
    { files: ['src/auth/**'], deny: ['oidc', 'domain', 'core', 'http', 'app'], packages: ['better-sqlite3', 'fastify'] },
    { files: ['src/oidc/**'], deny: ['domain', 'core', 'http', 'app'], packages: ['better-sqlite3', 'fastify'] },
    { files: ['src/domain/**'], deny: ['core', 'http', 'app'], packages: ['better-sqlite3', 'fastify'] },
    // core/: what the APIs are handed (the Core, metrics, readiness, logging, the answer cache)
    { files: ['src/core/**'], deny: ['http', 'app'], packages: ['better-sqlite3', 'fastify'] },
    // http/ translates: it builds no SQL and reaches the store only through the domain (types aside)
    { files: ['src/http/**'], deny: ['app'], typesOnly: ['store'], packages: ['better-sqlite3', 'kysely'] },
  ]),
  {
    files: ['test/**/*.ts', 'src/**/*.test.ts', 'bench/**/*.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'off', '@typescript-eslint/no-non-null-assertion': 'off', 'no-console': 'off' },
  },
);
