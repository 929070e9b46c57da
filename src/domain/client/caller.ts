// Who asks the Client API's read model: the identity and the API session of a credential, as the
// routes take them from a request.

/** Who asks: the identity and the API session of the credential. */
export interface Caller {
  identityId: string;
  apiSessionId: string;
  /** Config type ids the API session asked for at login. */
  configTypes: readonly string[];
  isMfaComplete: boolean;
  /** When the API session last gave its secondary factor (ms), or null. */
  mfaPassedAt: number | null;
  /** ms */
  sessionCreatedAt: number;
  /** For the entity references of answers. */
  identityName: string;
}
