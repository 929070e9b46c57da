// Enrollment tokens that were used (identities' and edge routers'): kept, hashed, until their
// enrollment would have expired, so that a token used again is answered 410
// INVALID_ENROLLMENT_ALREADY_ENROLLED (behaviour.md §2) instead of 400 for a token never issued.
import { ApiError } from '../errors.js';
import type { Executor } from '../store/store.js';
import type { WriteContext } from './resources.js';

/** Records a token as used, in the write that used it, and forgets those past their expiry. */
export async function spendToken(ctx: WriteContext, tokenHash: string, expiresAt: string): Promise<void> {
  await ctx.tx.deleteFrom('spent_enrollment_tokens').where('expires_at', '<=', ctx.now).execute();
  await ctx.tx
    .insertInto('spent_enrollment_tokens')
    .values({ token_hash: tokenHash, expires_at: expiresAt })
    .onConflict((oc) => oc.column('token_hash').doNothing())
    .execute();
}

/** The refusal of a token with no outstanding enrollment: 410 when it was used, else 400 with `message`. */
export async function unknownToken(ex: Executor, tokenHash: string, now: string, message: string): Promise<ApiError> {
  const spent = await ex
    .selectFrom('spent_enrollment_tokens')
    .select('token_hash')
    .where('token_hash', '=', tokenHash)
    .where('expires_at', '>', now)
    .executeTakeFirst();
  return spent ? new ApiError('INVALID_ENROLLMENT_ALREADY_ENROLLED', 'the token has already been used') : new ApiError('INVALID_ENROLLMENT_TOKEN', message);
}
