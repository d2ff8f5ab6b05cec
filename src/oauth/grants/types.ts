import type { FastifyRequest } from 'fastify';
import type { UserService } from '../../domain/users.js';
import type { Params } from '../http.js';
import type { OAuth } from '../service.js';

/** The token endpoint's success body (RFC 6749 §5.1). */
export interface TokenResponse {
  access_token: string;
  token_type: 'Bearer';
  expires_in: number;
  refresh_token?: string;
  scope: string;
}

export interface GrantContext {
  oauth: OAuth;
  users: UserService;
  request: FastifyRequest;
  params: Params;
}

export type GrantHandler = (ctx: GrantContext) => Promise<TokenResponse>;
