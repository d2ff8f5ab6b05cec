import { publicUserData, type User } from '../../domain/users.js';

/** The REST user resource (`/v1/users/{id}`), also printed by `atrium users create`. */
export interface RestUser {
  id: string;
  name: string;
  email: string;
  role: string;
  created_at: string;
  organization_id: string;
  _links: { self: { href: string }; organization: { href: string }; orders: { href: string } };
}

export function restUser(u: User): RestUser {
  return {
    ...publicUserData(u),
    _links: {
      self: { href: `/v1/users/${u.id}` },
      organization: { href: `/v1/organizations/${u.organizationId}` },
      orders: { href: `/v1/users/${u.id}/orders` },
    },
  };
}
