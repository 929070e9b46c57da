// Management routes of the store's upkeep: data integrity check and fix (202, run in the background,
// one at a time), their results, and snapshots. Admins only, as in the established controller: the
// results name records of every kind, and a snapshot copies every secret the store holds.
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { Core } from '../../core/core.js';
import { EMPTY, envelope } from '../envelope.js';
import { ADMIN_ONLY } from '../auth-requirements.js';
import { dataEnvelopeSchema, EmptySchema } from '../resource-routes.js';

const NullableDateTime = Type.Union([Type.String({ format: 'date-time' }), Type.Null()]);

const IntegrityResultsSchema = Type.Object(
  {
    startTime: NullableDateTime,
    endTime: NullableDateTime,
    inProgress: Type.Boolean(),
    fixingErrors: Type.Boolean(),
    tooManyErrors: Type.Boolean({ description: 'more errors were found than the results hold (1000)' }),
    error: Type.Union([Type.String(), Type.Null()], { description: 'why the run stopped, when it failed' }),
    results: Type.Array(Type.Object({ description: Type.String(), fixed: Type.Boolean() }, { title: 'dataIntegrityCheckDetail' }), {
      title: 'dataIntegrityCheckDetailList',
    }),
  },
  { title: 'dataIntegrityCheckDetails' },
);

const SnapshotSchema = Type.Object(
  { path: Type.String({ description: 'the file the snapshot was written to, beside the store' }) },
  { title: 'databaseSnapshotCreateDetails' },
);

export function databaseRoutes(app: FastifyInstance, core: Core): void {
  app.post('/database/check-data-integrity', {
    config: { auth: ADMIN_ONLY },
    schema: { operationId: 'checkDataIntegrity', tags: ['database'], response: { 202: EmptySchema } },
    handler: async (_request, reply) => {
      core.integrity.start(false);
      void reply.code(202);
      return envelope(EMPTY);
    },
  });

  app.post('/database/fix-data-integrity', {
    config: { auth: ADMIN_ONLY },
    schema: { operationId: 'fixDataIntegrity', tags: ['database'], response: { 202: EmptySchema } },
    handler: async (_request, reply) => {
      core.integrity.start(true);
      void reply.code(202);
      return envelope(EMPTY);
    },
  });

  app.get('/database/data-integrity-results', {
    config: { auth: ADMIN_ONLY },
    schema: {
      operationId: 'dataIntegrityResults',
      tags: ['database'],
      response: { 200: dataEnvelopeSchema(IntegrityResultsSchema, 'dataIntegrityCheckResultEnvelope') },
    },
    handler: async () => envelope(core.integrity.results()),
  });

  app.post('/database/snapshot', {
    config: { auth: ADMIN_ONLY },
    schema: {
      operationId: 'createDatabaseSnapshot',
      tags: ['database'],
      response: { 200: dataEnvelopeSchema(SnapshotSchema, 'databaseSnapshotCreateResultEnvelope') },
    },
    handler: async () => envelope({ path: await core.snapshots.request() }),
  });
}
