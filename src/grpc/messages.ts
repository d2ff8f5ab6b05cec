import type { UserActivityEvent } from '../domain/activity.js';
import { invalid, type Problems } from '../domain/errors.js';
import type { UpdateUserInput, User } from '../domain/users.js';
import type { Role } from '../store/types.js';
import type { ActivityEvent, UpdateUserRequest, User as UserMessage } from './gen/users/v1/users.gen.js';

/** Translation between the core's shapes and the proto messages; no rule lives here. */

/**
 * `email` and `organizationId` are what the viewer may see (the core decides); proto3 has no null,
 * so hidden is "".
 */
export function toUserMessage(
  user: User,
  email: string | null,
  organizationId: string | null = user.organizationId,
): UserMessage {
  return {
    id: user.id,
    name: user.name,
    email: email ?? '',
    role: user.role,
    createdAt: Math.floor(Date.parse(user.createdAt) / 1000),
    organizationId: organizationId ?? '',
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

/** How many unknown mask paths are named one by one, and how much of each: trailers stay small. */
const UNKNOWN_PATHS_NAMED = 10;
const PATH_SHOWN = 64;

/**
 * The core input from an UpdateUserRequest: only the fields named in `update_mask`. A missing
 * `user_id`, an empty or missing mask and unknown paths are added to `problems` (the caller adds
 * the core's problems of the values and throws them all at once). Unknown paths are named up to
 * ten, each cut to 64 characters, then counted: a request may hold a megabyte of them, and a
 * status too large for trailers never reaches a grpc-js client.
 */
export function updateInput(request: UpdateUserRequest, problems: Problems): UpdateUserInput {
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
  let unknown = 0;
  for (const path of paths) {
    if (!(UPDATE_MASK_PATHS as readonly string[]).includes(path)) {
      unknown += 1;
      if (unknown <= UNKNOWN_PATHS_NAMED) {
        const shown = path.length > PATH_SHOWN ? `${path.slice(0, PATH_SHOWN)}…` : path;
        problems.add(
          'update_mask.paths',
          `unknown field "${shown}" in update_mask; updatable fields: ${UPDATE_MASK_PATHS.join(', ')}`,
          'unknown_field',
        );
      }
      continue;
    }
    const field = path as MaskPath;
    if (field === 'role') input.role = request.role as Role;
    else input[field] = request[field];
  }
  if (unknown > UNKNOWN_PATHS_NAMED) {
    problems.add(
      'update_mask.paths',
      `and ${unknown - UNKNOWN_PATHS_NAMED} more unknown fields in update_mask`,
      'unknown_field',
    );
  }
  return input;
}
