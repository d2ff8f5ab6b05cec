import type { Role } from '../store/types.js';

/** Who is acting, as the core needs to know it: identity and role. Surfaces add how they learned it. */
export interface Actor {
  /** A user id (`usr_...`) or, for a client acting for itself, the client id. */
  id: string;
  kind: 'user' | 'client';
  /** The user's role; null for a client acting for itself. */
  role: Role | null;
}

export const isAdmin = (actor: Actor): boolean => actor.role === 'admin';

/** The system itself (CLI, seed, worker): allowed everything. */
export const SYSTEM_ACTOR: Actor = { id: 'system', kind: 'client', role: 'admin' };
