import { DomainError } from '../../domain/errors.js';
import type { UserService } from '../../domain/users.js';
import type { Role } from '../../store/types.js';
import { InvalidGrant } from '../errors.js';
import type { OAuth } from '../service.js';

/** The grant's user's current role; a deleted user ends the grant (its family is revoked). */
export async function liveUserRole(
  oauth: OAuth,
  users: UserService,
  userId: string,
  familyId: string,
  status: 400 | 401,
): Promise<Role> {
  try {
    return (await users.get(userId)).role;
  } catch (err) {
    if (err instanceof DomainError && err.code === 'not_found') {
      await oauth.refresh.revokeFamily(familyId, 'user_deleted');
      throw new InvalidGrant('The user of this grant no longer exists.', status);
    }
    throw err;
  }
}
