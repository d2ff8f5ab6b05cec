import type { UserActivityEvent } from '../domain/activity.js';
import { invalid, Problems } from '../domain/errors.js';
import type { UpdateUserInput, User } from '../domain/users.js';
import type { Role } from '../store/types.js';
import type { ActivityEvent, UpdateUserRequest, User as UserMessage } from './gen/users/v1/users.gen.js';

/** Translation between the core's shapes and the proto messages; no rule lives here. */

/** `email` is what the viewer may see (the core decides); proto3 has no null, so hidden is "". */
export function toUserMessage(user: User, email: string | null): UserMessage {
  return {
    id: user.id,
    name: user.name,
    email: email ?? '',
    role: user.role,
    createdAt: Math.floor(Date.parse(user.createdAt) / 1000),
    organizationId: user.organizationId,
  };
}

export function toActivityMessage(event: UserActivityEvent): ActivityEvent {
  return { eventType: event.type, timestamp: event.created, metadata: event.metadata };
}

/** proto3 cannot tell an empty string from an absent one, so a required id is checked here. */
export function requireUserId(userId: string): string {
  if (userId === '') throw invalid('user_id', 'user_id is required', 'required');
  return userId;
}

/** The field-mask paths UpdateUser accepts, and the core field each one sets. */
export const UPDATE_MASK_PATHS = ['name', 'email', 'role'] as const;
type MaskPath = (typeof UPDATE_MASK_PATHS)[number];

/**
 * The core input from an UpdateUserRequest: only the fields named in `update_mask`. An empty or
 * missing mask and any unknown path are refused, all reported at once.
 */
export function updateInput(request: UpdateUserRequest): UpdateUserInput {
  const problems = new Problems();
  if (request.userId === '') problems.add('user_id', 'user_id is required', 'required');
  const paths = request.updateMask ?? [];
  if (paths.length === 0) {
    problems.add(
      'update_mask',
      `update_mask must name at least one field: ${UPDATE_MASK_PATHS.join(', ')}`,
      'required',
    );
  }
  const input: UpdateUserInput = {};
  for (const path of paths) {
    if (!(UPDATE_MASK_PATHS as readonly string[]).includes(path)) {
      problems.add(
        'update_mask.paths',
        `unknown field "${path}" in update_mask; updatable fields: ${UPDATE_MASK_PATHS.join(', ')}`,
        'unknown_field',
      );
      continue;
    }
    const field = path as MaskPath;
    if (field === 'role') input.role = request.role as Role;
    else input[field] = request[field];
  }
  problems.throwIfAny();
  return input;
}
