import { Type } from '@sinclair/typebox';
import { field, MAX_LIST, MAX_NAME, defineResource } from './kit.js';

const Json = Type.Record(Type.String(), Type.Unknown(), { maxProperties: 100 });

/**
 * The control channel listeners a router offers other controllers: address → the groups served
 * there, a list of names, as the established controller stores and reads them; any other value
 * would be read back as no router takes it.
 */
const CtrlChanListeners = Type.Record(Type.String(), Type.Array(Type.String({ maxLength: MAX_NAME }), { maxItems: MAX_LIST }), { maxProperties: 100 });

/**
 * How far the controller has brought a router's copy of the network state. The router connection
 * reports it; a router that is not connected is SYNC_UNKNOWN.
 */
export const ROUTER_SYNC_STATUSES = [
  'SYNC_NEW',
  'SYNC_QUEUED',
  'SYNC_HELLO',
  'SYNC_HELLO_WAIT',
  'SYNC_RESYNC_WAIT',
  'SYNC_IN_PROGRESS',
  'SYNC_DONE',
  'SYNC_UNKNOWN',
  'SYNC_DISCONNECTED',
  'SYNC_HELLO_TIMEOUT',
  'SYNC_ERROR',
] as const;

/**
 * The outstanding enrollment of a router (domain/router-enrollment.ts): its one-time token kept as a
 * digest, by which the router is found, and inside its JWT, sealed; null once the router has enrolled.
 */
const enrollmentFields = {
  enrollmentCreatedAt: field.datetime('when the outstanding enrollment was made; null once enrolled', { readOnly: true, nullable: true }),
  enrollmentExpiresAt: field.datetime('when the outstanding enrollment stops being accepted; null once enrolled', { readOnly: true, nullable: true }),
  enrollmentTokenHash: field.string('SHA-256 of the one-time token of the outstanding enrollment', {
    readOnly: true,
    writeOnly: true,
    nullable: true,
    unique: true,
    maxLength: 128,
  }),
  enrollmentSealedJwt: field.string('the enrollment JWT, which carries the token, sealed', {
    readOnly: true,
    writeOnly: true,
    nullable: true,
    maxLength: 8192,
  }),
};

export const edgeRouters = defineResource({
  name: 'edge-routers',
  label: 'edge router',
  table: 'edge_routers',
  permission: 'router',
  links: ['edge-router-policies'],
  related: [
    { collection: 'edge-router-policies', operationId: 'listEdgeRouterEdgeRouterPolicies' },
    { collection: 'identities', through: 'edge-router-policies', operationId: 'listEdgeRouterIdentities' },
    { collection: 'service-edge-router-policies', operationId: 'listEdgeRouterServiceEdgeRouterPolicies' },
    { collection: 'services', through: 'service-edge-router-policies', operationId: 'listEdgeRouterServices' },
  ],
  fields: {
    name: field.name(),
    cost: field.integer('routing cost', { minimum: 0, maximum: 65535, nullable: true, default: 0 }),
    disabled: field.boolean('refuses connections while true', { nullable: true, default: false }),
    isTunnelerEnabled: field.boolean('also acts as a tunneler with an identity of its own', { default: false }),
    noTraversal: field.boolean('not used for transit', { nullable: true, default: false }),
    roleAttributes: field.roleAttributes(),
    configs: field.set('ids of router configs, at most one of each config type', {
      nullable: true,
      uniqueItems: true,
      schema: Type.String({ minLength: 1, maxLength: MAX_NAME }),
      maxItems: MAX_LIST,
    }),
    appData: field.json(Json, 'application data', { nullable: true, filterable: false }),
    ctrlChanListeners: field.json(CtrlChanListeners, 'control channel listeners: address → groups', { nullable: true, filterable: false }),
    fingerprint: field.string('fingerprint of its certificate once enrolled', { readOnly: true, nullable: true, maxLength: MAX_NAME }),
    hostname: field.string('host name it reported', { readOnly: true, default: '', maxLength: MAX_NAME }),
    isOnline: field.boolean('connected to the controller now', { readOnly: true, default: false }),
    isVerified: field.boolean('enrolled', { readOnly: true, default: false }),
    supportedProtocols: field.json(Type.Record(Type.String(), Type.String(), { maxProperties: 20 }), 'protocol → address', {
      readOnly: true,
      default: {},
      filterable: false,
    }),
    syncStatus: field.enum(ROUTER_SYNC_STATUSES, 'how far the router has received the network state', { readOnly: true, default: 'SYNC_UNKNOWN' }),
    ...enrollmentFields,
  },
});

const routerFields = {
  name: field.name(),
  cost: field.integer('routing cost', { minimum: 0, maximum: 65535, nullable: true, default: 0 }),
  disabled: field.boolean('refuses connections while true', { nullable: true, default: false }),
  noTraversal: field.boolean('not used for transit', { nullable: true, default: false }),
  ctrlChanListeners: field.json(CtrlChanListeners, 'control channel listeners: address → groups', { nullable: true, filterable: false }),
  // An edge router's own configs read here too (the view), and filters name them: `anyOf(configs)`.
  configs: field.set('ids of router configs, at most one of each config type', {
    nullable: true,
    uniqueItems: true,
    schema: Type.String({ minLength: 1, maxLength: MAX_NAME }),
    maxItems: MAX_LIST,
  }),
  fingerprint: field.string('fingerprint of its certificate once enrolled', { readOnly: true, nullable: true, maxLength: MAX_NAME }),
  isOnline: field.boolean('connected to the controller now', { readOnly: true, default: false }),
  isVerified: field.boolean('enrolled', { readOnly: true, default: false }),
  ...enrollmentFields,
};

/**
 * Routers, served at /routers and /transit-routers. The routers table holds those without edge
 * functions; an edge router is a router too, so both paths list every router, edge routers included
 * (the view over both tables), as the established controller does. An edge router read here shows
 * its router fields, and is changed at /edge-routers.
 */
export const routers = defineResource({
  name: 'routers',
  label: 'router',
  table: 'routers',
  readFrom: 'all_routers',
  permission: 'router',
  fields: routerFields,
});

export const transitRouters = defineResource({
  ...routers,
  name: 'transit-routers',
  label: 'transit router',
  operationIds: { list: 'listTransitRouters' },
});
