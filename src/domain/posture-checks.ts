// Posture checks beyond CRUD: what each kind requires of its own fields (which fields a kind owns
// is the definition's), their defaults, their revisions, and the seeded posture check types.
import { Type } from '@sinclair/typebox';
import { fieldError } from '../errors.js';
import { OS_TYPES, POSTURE_CHECK_TYPES, postureChecks, type PostureCheckType } from '../resources/posture-checks.js';
import { fieldsOfKind, kindFields, MAX_NAME, type WriteOfDef } from '../resources/kit.js';
import type { Entity } from '../store/repository.js';
import { isVersionConstraint } from '../policy/posture.js';
import type { ResourceBehaviour, ResourceService, WriteContext } from './resources.js';

export type { PostureCheckType };
type OsType = (typeof OS_TYPES)[number];

const DESKTOP: readonly OsType[] = ['Windows', 'WindowsServer', 'macOS', 'Linux'];

/** The operating systems each kind of check applies to (what the seeded types list). */
export const POSTURE_CHECK_TYPE_OS: Readonly<Record<PostureCheckType, readonly OsType[]>> = {
  OS: OS_TYPES,
  PROCESS: DESKTOP,
  PROCESS_MULTI: DESKTOP,
  DOMAIN: ['Windows', 'WindowsServer'],
  MAC: DESKTOP,
  MFA: OS_TYPES,
};

const ALL_KIND_FIELDS = kindFields(postureChecks);

/** MFA: a passed MFA never times out unless timeoutSeconds says otherwise. */
export const MFA_DEFAULTS = {
  timeoutSeconds: -1,
  promptOnWake: false,
  promptOnUnlock: false,
  ignoreLegacyEndpoints: false,
} as const;

/** Six hex pairs, separated all by `:`, all by `-`, or not at all. */
const MAC_ADDRESS = /^[0-9A-Fa-f]{2}([:-]?)[0-9A-Fa-f]{2}(?:\1[0-9A-Fa-f]{2}){4}$/;

function isKind(value: unknown): value is PostureCheckType {
  return typeof value === 'string' && (POSTURE_CHECK_TYPES as readonly string[]).includes(value);
}

function isAbsent(value: unknown): value is null | undefined {
  return value === null || value === undefined;
}

/** The list `value` of field `name`, which a check of `kind` needs non-empty. */
function requireNonEmpty<T>(value: T[] | null | undefined, name: string, kind: string): T[] {
  if (!Array.isArray(value) || value.length === 0) {
    throw fieldError(name, `a ${kind} check needs a non-empty ${name}`, Array.isArray(value) ? undefined : value);
  }
  return value;
}

function checkOs(field: string, osType: OsType, kind: PostureCheckType): void {
  if (!POSTURE_CHECK_TYPE_OS[kind].includes(osType)) {
    throw fieldError(field, `${kind} checks apply to ${POSTURE_CHECK_TYPE_OS[kind].join(', ')}`, osType);
  }
}

/** Checks and completes a posture check of its kind. */
function validateKind(next: WriteOfDef<typeof postureChecks>): void {
  // The same record, its fields looked up by name (those only some kinds own, the MFA defaults).
  const byName: Entity = next;
  const kind = next.typeId;
  // typeId is an enum (postureCheckType) as well as the id of a type: a value outside it is invalid.
  if (!isKind(kind)) throw fieldError('typeId', `must be one of ${POSTURE_CHECK_TYPES.join(', ')}`, kind);
  const own = fieldsOfKind(postureChecks, kind);
  for (const name of ALL_KIND_FIELDS) {
    const value = byName[name];
    if (!own.includes(name) && !isAbsent(value)) {
      throw fieldError(name, `not a field of ${kind} checks`, typeof value === 'object' ? undefined : value);
    }
  }
  switch (kind) {
    case 'OS': {
      const systems = requireNonEmpty(next.operatingSystems, 'operatingSystems', kind);
      systems.forEach((os, i) => {
        checkOs(`operatingSystems[${i}].type`, os.type, kind);
        os.versions.forEach((v, j) => {
          if (!isVersionConstraint(v)) {
            throw fieldError(`operatingSystems[${i}].versions[${j}]`, 'is not a version constraint such as >=10.0.19041, <7 || =8.0.1', v);
          }
        });
      });
      break;
    }
    case 'PROCESS': {
      const process = next.process;
      if (isAbsent(process)) throw fieldError('process', 'a PROCESS check needs a process');
      checkOs('process.osType', process.osType, kind);
      // Stored lowercase, as the established controller stores them; evaluation ignores case.
      if (process.hashes) process.hashes = process.hashes.map((h) => h.toLowerCase());
      if (process.signerFingerprint !== undefined) process.signerFingerprint = process.signerFingerprint.toLowerCase();
      break;
    }
    case 'PROCESS_MULTI': {
      const processes = requireNonEmpty(next.processes, 'processes', kind);
      processes.forEach((p, i) => checkOs(`processes[${i}].osType`, p.osType, kind));
      if (isAbsent(next.semantic)) throw fieldError('semantic', 'a PROCESS_MULTI check needs a semantic (AllOf or AnyOf)');
      // Lists left out read [] (none asked for), as the established controller answers them.
      next.processes = processes.map((p) => ({ ...p, hashes: p.hashes ?? [], signerFingerprints: p.signerFingerprints ?? [] }));
      break;
    }
    case 'DOMAIN':
      requireNonEmpty(next.domains, 'domains', kind);
      break;
    case 'MAC': {
      const addresses = requireNonEmpty(next.macAddresses, 'macAddresses', kind);
      addresses.forEach((a, i) => {
        if (!MAC_ADDRESS.test(a)) throw fieldError(`macAddresses[${i}]`, 'must be a MAC address such as 0a:1b:2c:3d:4e:5f', a);
      });
      // Stored as lowercase hex without separators, as the established controller stores them (one
      // address written in two forms is one); evaluation compares reports in the same form.
      next.macAddresses = [...new Set(addresses.map((a) => a.toLowerCase().replace(/[^0-9a-f]/g, '')))];
      break;
    }
    case 'MFA':
      for (const [name, value] of Object.entries(MFA_DEFAULTS)) if (isAbsent(byName[name])) byName[name] = value;
      break;
  }
}

export function postureCheckBehaviour(): ResourceBehaviour<typeof postureChecks> {
  return {
    async validate(_ctx, next, prev) {
      validateKind(next);
      // Each change of a check is a new revision of it (1 when created).
      if (prev) next.version = Number(prev.version ?? 1) + 1;
    },
  };
}

/** The typeId a patch or full update must name: the stored one (a check never changes kind). */
export const TypeIdBodySchema = Type.String({
  minLength: 1,
  maxLength: MAX_NAME,
  description: 'kind of the check: required, and must be the stored kind',
});

/** Refuses a patch or full update whose typeId is not the stored kind of the check (404 if none). */
export async function assertPostureCheckType(service: ResourceService, id: string, typeId: unknown): Promise<void> {
  const stored = (await service.get(id)).typeId;
  if (stored !== typeId) {
    throw fieldError('typeId', `the check is of type ${String(stored)}; its type cannot change`, typeId);
  }
}

/** The posture check types every controller starts with: ids and names are the kinds. */
export async function seedPostureCheckTypes(ctx: WriteContext): Promise<void> {
  const types = ctx.resources.get('posture-check-types').repo;
  for (const id of POSTURE_CHECK_TYPES) {
    if (await types.exists(ctx.tx, id)) continue;
    await ctx.insert('posture-check-types', {
      id,
      createdAt: ctx.now,
      updatedAt: ctx.now,
      tags: {},
      name: id,
      operatingSystems: POSTURE_CHECK_TYPE_OS[id].map((type) => ({ type, versions: [] })),
    });
  }
}
