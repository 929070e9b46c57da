import { Type, type TSchema } from '@sinclair/typebox';
import { field, MAX_NAME, defineResource } from './kit.js';

const SignerIdList = Type.Array(Type.String({ minLength: 1, maxLength: MAX_NAME }), { maxItems: 100 });
/**
 * Writes may send null for an unset list (clients send one so); it is stored and read as [], which
 * means the same at login: any signer (behaviour.md §7b, as the established controller reads it).
 */
const SignerIds = Type.Union([SignerIdList, Type.Null()]);

const primaryParts = {
  cert: {
    allowed: Type.Boolean(),
    allowExpiredCerts: Type.Boolean(),
  },
  extJwt: {
    allowed: Type.Boolean(),
    allowedSigners: SignerIds,
  },
  updb: {
    allowed: Type.Boolean(),
    lockoutDurationMinutes: Type.Integer({ minimum: 0, maximum: 525_600 }),
    maxAttempts: Type.Integer({ minimum: 0, maximum: 10_000 }),
    minPasswordLength: Type.Integer({ minimum: 5, maximum: 100 }),
    requireMixedCase: Type.Boolean(),
    requireNumberChar: Type.Boolean(),
    requireSpecialChar: Type.Boolean(),
  },
};

function objectOf(parts: Record<string, Record<string, TSchema>>, partial: boolean): TSchema {
  const props: Record<string, TSchema> = {};
  for (const [k, inner] of Object.entries(parts)) {
    const obj = partial
      ? Type.Object(Object.fromEntries(Object.entries(inner).map(([n, s]) => [n, Type.Optional(s)])))
      : Type.Object(inner);
    props[k] = partial ? Type.Optional(obj) : obj;
  }
  return Type.Object(props);
}

const secondaryParts = {
  requireTotp: Type.Boolean(),
  requireExtJwtSigner: Type.Union([Type.String({ minLength: 1, maxLength: MAX_NAME }), Type.Null()]),
};

/** `primary` as it reads: allowedSigners always a list (empty: any signer). */
export const PrimaryReadSchema = objectOf({ ...primaryParts, extJwt: { ...primaryParts.extJwt, allowedSigners: SignerIdList } }, false);

export const DEFAULT_PRIMARY = {
  cert: { allowed: true, allowExpiredCerts: true },
  extJwt: { allowed: true, allowedSigners: [] as string[] },
  updb: {
    allowed: true,
    lockoutDurationMinutes: 0,
    maxAttempts: 0,
    minPasswordLength: 5,
    requireMixedCase: false,
    requireNumberChar: false,
    requireSpecialChar: false,
  },
};
export const DEFAULT_SECONDARY = { requireTotp: false, requireExtJwtSigner: null };

export interface AuthPolicyRules {
  primary: typeof DEFAULT_PRIMARY;
  secondary: { requireTotp: boolean; requireExtJwtSigner: string | null };
}

export const DEFAULT_AUTH_POLICY_ID = 'default';

export const authPolicies = defineResource({
  name: 'auth-policies',
  label: 'auth policy',
  table: 'auth_policies',
  permission: 'auth-policy',
  system: true,
  operationIds: { list: 'listAuthPolicies' },
  fields: {
    name: field.name(),
    primary: field.json(objectOf(primaryParts, false), 'primary authentication methods and their rules', {
      required: 'always',
      patchSchema: objectOf(primaryParts, true),
      default: DEFAULT_PRIMARY,
    }),
    // Writes may leave requireExtJwtSigner out, as the established documents require only
    // requireTotp; it is stored (and read) null then.
    secondary: field.json(
      Type.Object({ ...secondaryParts, requireExtJwtSigner: Type.Optional(secondaryParts.requireExtJwtSigner) }),
      'secondary factors required after the primary one',
      {
        required: 'always',
        patchSchema: Type.Object(
          Object.fromEntries(Object.entries(secondaryParts).map(([n, s]) => [n, Type.Optional(s)])),
        ),
        default: DEFAULT_SECONDARY,
      },
    ),
  },
});
