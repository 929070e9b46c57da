// Posture checks and their types. Every kind of check lives in one table; the definition names the
// fields each kind owns, from which the answers, the read schema and the checks of a write follow.
import { Type } from '@sinclair/typebox';
import { field, MAX_NAME, defineResource, type KindsDef } from './kit.js';

export const OS_TYPES = ['Windows', 'WindowsServer', 'Android', 'iOS', 'Linux', 'macOS'] as const;

const Str = Type.String({ minLength: 1, maxLength: MAX_NAME });
const OsType = Type.Union(OS_TYPES.map((t) => Type.Literal(t)));
export const OperatingSystemSchema = Type.Object(
  { type: OsType, versions: Type.Array(Type.String({ maxLength: 100 }), { maxItems: 100 }) },
  { additionalProperties: false },
);
const ProcessBase = {
  osType: OsType,
  path: Type.String({ minLength: 1, maxLength: 1024 }),
  hashes: Type.Optional(Type.Array(Type.String({ maxLength: 128 }), { maxItems: 100 })),
};
export const ProcessSchema = Type.Object(
  { ...ProcessBase, signerFingerprint: Type.Optional(Type.String({ maxLength: 128 })) },
  { additionalProperties: false },
);
export const ProcessMultiSchema = Type.Object(
  { ...ProcessBase, signerFingerprints: Type.Optional(Type.Array(Type.String({ maxLength: 128 }), { maxItems: 100 })) },
  { additionalProperties: false },
);

export const postureCheckTypes = defineResource({
  name: 'posture-check-types',
  label: 'posture check type',
  table: 'posture_check_types',
  permission: 'posture-check',
  operations: ['list', 'get'],
  fields: {
    name: field.name(),
    operatingSystems: field.json(Type.Array(OperatingSystemSchema, { maxItems: 10 }), 'operating systems the check applies to', {
      default: [],
      filterable: false,
    }),
  },
});

/** The kinds of check and the fields each owns. */
const postureCheckKinds = {
  field: 'typeId',
  fields: {
    OS: ['operatingSystems'],
    PROCESS: ['process'],
    PROCESS_MULTI: ['processes', 'semantic'],
    DOMAIN: ['domains'],
    MAC: ['macAddresses'],
    MFA: ['timeoutSeconds', 'promptOnWake', 'promptOnUnlock', 'ignoreLegacyEndpoints'],
  },
} as const satisfies KindsDef;

/** One table for every kind of check; each kind's fields are null on the others. */
export const postureChecks = defineResource({
  name: 'posture-checks',
  label: 'posture check',
  table: 'posture_checks',
  permission: 'posture-check',
  kinds: postureCheckKinds,
  fields: {
    name: field.name(),
    typeId: field.ref('posture-check-types', 'kind of check: OS, PROCESS, PROCESS_MULTI, DOMAIN, MAC or MFA', {
      required: 'create',
      createOnly: true,
      ref: { collection: 'posture-check-types', as: 'type' },
    }),
    roleAttributes: field.roleAttributes(),
    version: field.integer('revision of the check: 1 when created, one more on every change', { readOnly: true, minimum: 1, default: 1 }),
    domains: field.set('DOMAIN: allowed Windows domains', { nullable: true, default: undefined, schema: Str, maxItems: 1000 }),
    operatingSystems: field.json(Type.Array(OperatingSystemSchema, { maxItems: 20 }), 'OS: allowed systems and versions', {
      nullable: true,
      filterable: false,
    }),
    process: field.json(ProcessSchema, 'PROCESS: a process that must run', { nullable: true, filterable: false }),
    processes: field.json(Type.Array(ProcessMultiSchema, { maxItems: 100 }), 'PROCESS_MULTI: processes', {
      nullable: true,
      filterable: false,
    }),
    semantic: field.enum(['AllOf', 'AnyOf'], 'PROCESS_MULTI: all or any of the processes', { nullable: true }),
    macAddresses: field.set('MAC: allowed hardware addresses', {
      nullable: true,
      default: undefined,
      schema: Type.String({ minLength: 1, maxLength: 64 }),
      maxItems: 1000,
    }),
    timeoutSeconds: field.integer('MFA: seconds a passed MFA stays valid; -1: forever', { minimum: -1, maximum: 2 ** 31 - 1, nullable: true }),
    promptOnWake: field.boolean('MFA: ask again when the device wakes', { nullable: true }),
    promptOnUnlock: field.boolean('MFA: ask again when the device is unlocked', { nullable: true }),
    ignoreLegacyEndpoints: field.boolean('MFA: do not apply to legacy clients', { nullable: true }),
  },
});

/** The kinds of check: the ids (and names) of the posture check types. */
export type PostureCheckType = keyof typeof postureCheckKinds.fields;
export const POSTURE_CHECK_TYPES = Object.keys(postureCheckKinds.fields) as readonly PostureCheckType[];
