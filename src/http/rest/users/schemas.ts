import { Type } from '@sinclair/typebox';
import { ROLES } from '../../../domain/users.js';
import type { Role } from '../../../store/types.js';
import { EMPTY_OR_NOT_BLANK, ErrorBodySchema, standardErrors } from '../common-schemas.js';

const Link = Type.Object({ href: Type.String() });

const Id = (description: string) => Type.String({ minLength: 1, maxLength: 200, description });

export const UserParams = Type.Object({ user_id: Id('User id (`usr_...`).') });
export const OrganizationParams = Type.Object({ organization_id: Id('Organization id (`org_...`).') });

/** A plain `enum`, so a wrong value gives one `invalid_enum` detail naming the choices. */
const RoleSchema = Type.Unsafe<Role>({ type: 'string', enum: [...ROLES], description: "The user's role." });

export const RestUserSchema = Type.Object(
  {
    id: Type.String({ examples: ['usr_01jb3k5m7q8r9s0t1v2w3x4y5z'] }),
    name: Type.String(),
    email: Type.String({ format: 'email' }),
    role: Type.Unsafe<string>({ type: 'string', enum: [...ROLES] }),
    created_at: Type.String({ format: 'date-time' }),
    organization_id: Type.String(),
    _links: Type.Object({ self: Link, organization: Link, orders: Link }),
  },
  { description: 'A user (HAL-style `_links`).' },
);

export const UpdateUserBody = Type.Object(
  {
    name: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 100,
        // Not blank (white space and invisible format characters only, as the core's isBlank).
        pattern: EMPTY_OR_NOT_BLANK,
        description: 'Display name, 1 to 100 characters.',
      }),
    ),
    email: Type.Optional(Type.String({ format: 'email', maxLength: 254 })),
    role: Type.Optional(RoleSchema),
  },
  { additionalProperties: false, description: 'Fields to change; all optional, unknown fields are refused.' },
);

export const OrganizationSchema = Type.Object({
  id: Type.String(),
  name: Type.String(),
  created_at: Type.String({ format: 'date-time' }),
  _links: Type.Object({ self: Link }),
});

const upper = (code: string, description: string) => ({
  ...ErrorBodySchema,
  description: `${description} (error \`${code}\`).`,
});

/** Error responses of the user API: resource errors in upper case, caller errors as everywhere. */
export const userApiErrors = {
  ...standardErrors,
  400: upper('VALIDATION_ERROR', 'Invalid request fields, with details'),
  403: upper('FORBIDDEN', 'Not allowed for this caller; a missing scope answers `insufficient_scope`'),
  404: upper('NOT_FOUND', 'No such resource'),
};
