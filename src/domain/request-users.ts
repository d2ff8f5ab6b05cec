import type { User } from './users.js';

/**
 * Users already read from the store during one call, so the same call does not read them again.
 *
 * Authentication by API key reads the caller's user row anyway (the key lookup joins it to refuse
 * deleted users), and the commonest read there is, "my own user", would read that row a second
 * time a few microseconds later. A surface makes one of these per call, lets authentication
 * remember the caller, and hands it to `UserService.read`, which answers from it.
 *
 * It never outlives the call it was made for, so what it answers is exactly as fresh as the
 * call's own authentication. Only reads take one: a call that changes a user and then reads it
 * back must read the store (the write returns the new user anyway). Never share one between calls
 * or keep one on a long-lived connection (a GraphQL WebSocket, a gRPC stream).
 */
export class RequestUsers {
  // One per call on the gRPC hot path, and most calls remember one user at most: no Map until needed.
  #known: Map<string, User> | undefined;

  /** A live user this call has just read from the store. */
  remember(user: User): void {
    (this.#known ??= new Map()).set(user.id, user);
  }

  /** The user if this call has read it, else undefined (the caller reads the store). */
  known(id: string): User | undefined {
    return this.#known?.get(id);
  }
}
