// One Edge API (client or management) as an encapsulated Fastify plugin: its OpenAPI document (openapi.ts),
// its error rendering, the informational routes and the API's own routes.
import swagger from '@fastify/swagger';
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { ApiBinding, ListenerConfig } from '../config/index.js';
import type { Core } from '../core/core.js';
import { answerCheck } from './answer-check.js';
import { API_VERSION } from './envelope.js';
import { credentialHook } from './credentials.js';
import { handleError, handleNotFound } from './errors.js';
import { API_NAMES, EDGE_API_PATHS, registerInfoRoutes } from './info.js';
import { documentOptions } from './openapi.js';
import { installTracing } from './tracing.js';
import { registerWriteOrigin } from './write-origin.js';

export type EdgeBinding = Extract<ApiBinding, 'edge-client' | 'edge-management'>;

export interface EdgeApiOptions {
  core: Core;
  binding: EdgeBinding;
  listener: ListenerConfig;
  /** The bind point's advertised host:port. */
  address: string;
  routes: (app: FastifyInstance, core: Core) => void;
}

export async function registerEdgeApi(server: FastifyInstance, opts: EdgeApiOptions): Promise<void> {
  await server.register(
    async (app) => {
      await app.register(swagger, documentOptions(API_NAMES[opts.binding], API_VERSION, opts.address));
      app.setErrorHandler(handleError);
      app.setNotFoundHandler(handleNotFound);
      // Where answers are checked, each is held to its route's response schema (answer-check.ts).
      const check = opts.core.resources.options.checkAnswers ? answerCheck() : undefined;
      if (check) {
        app.addHook('preSerialization', async (request, reply, payload) => {
          check(request, reply, payload);
          return payload;
        });
      }
      app.decorateReply('serializeAnswer', function serializeAnswer(this: FastifyReply, payload: unknown): string {
        check?.(this.request, this, payload);
        return this.serialize(payload) as string;
      });
      app.addHook('onRequest', credentialHook(opts.core));
      installTracing(app);
      registerWriteOrigin(app, opts.core.kernel);
      registerInfoRoutes(app, opts.core, opts.binding, opts.listener, opts.address);
      opts.routes(app, opts.core);
    },
    { prefix: EDGE_API_PATHS[opts.binding] },
  );
}
