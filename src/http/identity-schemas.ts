// Computed read fields of identities, for response schemas (and so the OpenAPI document).
import { Type } from '@sinclair/typebox';

export const IdentityReadExtra = {
  typeId: Type.String(),
  authenticators: Type.Object({
    updb: Type.Optional(Type.Object({ id: Type.String(), username: Type.Union([Type.String(), Type.Null()]) })),
    cert: Type.Optional(Type.Object({ id: Type.String(), fingerprint: Type.Union([Type.String(), Type.Null()]) })),
  }),
  hasApiSession: Type.Boolean(),
  isMfaEnabled: Type.Boolean(),
  hasEdgeRouterConnection: Type.Boolean(),
  edgeRouterConnectionStatus: Type.String(),
};
