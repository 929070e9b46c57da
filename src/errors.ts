// The error catalogue (behaviour.md §2). Domain code throws ApiError with a catalogue code; each API
// renders it once. Nothing outside this file decides which status a code gets.

export const ERROR_STATUS = {
  COULD_NOT_VALIDATE: 400,
  COULD_NOT_PARSE_BODY: 400,
  INVALID_FILTER: 400,
  INVALID_PAGINATION: 400,
  INVALID_SORT_IDENTIFIER: 400,
  UNAUTHORIZED: 401,
  INVALID_AUTH: 401,
  INVALID_AUTH_METHOD: 400,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  METHOD_NOT_ALLOWED: 405,
  REQUEST_ENTITY_TOO_LARGE: 413,
  // Answered by the listener itself when a request misses its deadline or its headers overflow.
  REQUEST_TIMEOUT: 408,
  REQUEST_HEADER_FIELDS_TOO_LARGE: 431,
  // An Expect header other than 100-continue.
  EXPECTATION_FAILED: 417,
  INVALID_CONTENT_TYPE: 400,
  UNSUPPORTED_MEDIA_TYPE: 415,
  ENTITY_CAN_NOT_BE_UPDATED: 400,
  ENTITY_CAN_NOT_BE_DELETED: 400,
  CAN_NOT_DELETE_REFERENCED_ENTITY: 409,
  // An edge router changed through /routers: it is changed at /edge-routers (the established code).
  CAN_NOT_UPDATE_ROUTER: 409,
  REFERENCED_ENTITY_NOT_FOUND: 400,
  ENROLLMENT_EXISTS: 409,
  ENROLLMENT_EXPIRED: 400,
  INVALID_ENROLLMENT_TOKEN: 400,
  INVALID_ENROLLMENT_ALREADY_ENROLLED: 410,
  // A token enrollment its signer or auth policy does not allow (the established code).
  INVALID_ENROLLMENT_NOT_ALLOWED: 409,
  COULD_NOT_PROCESS_CSR: 400,
  MISSING_OR_INVALID_CSR: 400,
  CA_ALREADY_VERIFIED: 409,
  CERT_FAILED_VALIDATION: 400,
  // Enrolling with a certificate of a third-party CA (ottca, auto CA enrollment); the established codes.
  CERTIFICATE_FAILED_VALIDATION: 400,
  CERT_IN_USE: 409,
  ENROLLMENT_CA_NOT_VALID: 400,
  ENROLLMENT_NO_VALID_CAS: 400,
  MISSING_CERT_CLAIM: 400,
  INVALID_COMMON_NAME: 400,
  EXPECTED_PEM_CERTIFICATE: 400,
  // A certificate authenticator that cannot be extended (not the network's, none pending to verify).
  CAN_NOT_UPDATE_AUTHENTICATOR: 409,
  // The certificate handed to extend-verify is not the one the extension issued.
  INVALID_CLIENT_CERT: 400,
  MFA_EXISTS: 409,
  MFA_ENROLLMENT_NOT_STARTED: 404,
  MFA_NOT_ENROLLED: 409,
  MFA_INVALID_TOKEN: 401,
  INVALID_POSTURE: 409,
  NO_EDGE_ROUTERS_AVAILABLE: 400,
  INVALID_BACKING_TOKEN_TYPE: 400,
  RATE_LIMITED: 429,
  SERVER_TOO_MANY_REQUESTS: 429,
  SERVICE_UNAVAILABLE: 503,
  UNHANDLED: 500,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

/** Statuses an API answers some codes with instead of the catalogue's. */
export type StatusOverrides = Partial<Record<ErrorCode, number>>;

/**
 * The OIDC API answers a wrong TOTP code with 400 (controller-interface.md, "Errors", OIDC
 * specifics; behaviour.md §6), where the Edge APIs answer 401.
 */
export const OIDC_STATUS: StatusOverrides = { MFA_INVALID_TOKEN: 400 };

/** A field problem: the first offending field of a request. */
export interface FieldCause {
  field: string;
  reason: string;
  value?: unknown;
}

/** Any other cause: a nested code and message, optionally with data. */
export interface CodeCause {
  code: string;
  message: string;
  data?: unknown;
}

export type ErrorCause = FieldCause | CodeCause | Record<string, unknown>;

export class ApiError extends Error {
  readonly status: number;
  constructor(
    readonly code: ErrorCode,
    message: string,
    override readonly cause?: ErrorCause,
    /** Extra response headers (Retry-After, WWW-Authenticate, ...). */
    readonly headers?: Record<string, string>,
  ) {
    super(message);
    this.name = 'ApiError';
    this.status = ERROR_STATUS[code];
  }
}

export function fieldError(
  field: string,
  reason: string,
  value?: unknown,
  code: ErrorCode = 'COULD_NOT_VALIDATE',
): ApiError {
  return new ApiError(code, `the value for field ${field} is invalid: ${reason}`, {
    field,
    reason,
    value,
  });
}

export function notFound(entity: string, id?: string): ApiError {
  return new ApiError(
    'NOT_FOUND',
    id === undefined ? `the ${entity} was not found` : `the ${entity} with id ${id} was not found`,
  );
}
