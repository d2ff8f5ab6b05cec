import { TIERS, KEY_MODES } from '../auth/api-keys.js';
import type { Services } from '../compose.js';
import { restUser } from '../http/rest/shapes.js';
import { SYSTEM_ACTOR } from '../domain/actor.js';
import { ROLES } from '../domain/users.js';
import { OAUTH_COMMANDS } from '../oauth/cli.js';
import { integer, oneOf, parse, required, withId } from './args.js';
import { WEBHOOK_COMMANDS } from '../webhooks/cli.js';

/**
 * An admin command: its synopsis (decisions §2; printed by `atrium --help` and `atrium CMD --help`)
 * and what runs against the services and returns the one JSON object to print.
 */
export interface AdminCommand {
  synopsis: string;
  run: (services: Services, argv: string[]) => Promise<unknown>;
}

export const ADMIN_COMMANDS: Record<string, AdminCommand> = {
  'orgs create': {
    synopsis: 'orgs create --name N',
    run: async (s, argv) => {
      const { values } = parse(argv, { name: { type: 'string' } });
      const org = await s.core.organizations.create({ name: required(values, 'name') });
      return { id: org.id, name: org.name, created_at: org.createdAt };
    },
  },

  'users create': {
    synopsis:
      'users create --handle H --email E [--name "First Last"] [--role admin|member|viewer] [--org ID] [--password P]',
    run: async (s, argv) => {
      const { values } = parse(argv, {
        handle: { type: 'string' },
        email: { type: 'string' },
        name: { type: 'string' },
        role: { type: 'string' },
        org: { type: 'string' },
        password: { type: 'string' },
      });
      const user = await s.core.users.create({
        handle: required(values, 'handle'),
        email: required(values, 'email'),
        name: values.name,
        role: oneOf(values.role, ROLES, 'role'),
        organizationId: values.org,
        password: values.password,
      });
      return restUser(user);
    },
  },

  'products create': {
    synopsis: 'products create --name N --price-cents P',
    run: async (s, argv) => {
      const { values } = parse(argv, { name: { type: 'string' }, 'price-cents': { type: 'string' } });
      const price = integer(required(values, 'price-cents'), 'price-cents')!;
      const p = await s.core.products.create({ name: required(values, 'name'), priceCents: price });
      return { id: p.id, name: p.name, price_cents: p.priceCents, active: p.active, created_at: p.createdAt };
    },
  },

  'api-keys create': {
    synopsis: 'api-keys create --user ID [--tier free|starter|growth|enterprise] [--mode test|live]',
    run: async (s, argv) => {
      const { values } = parse(argv, {
        user: { type: 'string' },
        tier: { type: 'string' },
        mode: { type: 'string' },
      });
      return s.apiKeys.create({
        userId: required(values, 'user'),
        tier: oneOf(values.tier, TIERS, 'tier') ?? null,
        mode: oneOf(values.mode, KEY_MODES, 'mode') ?? 'test',
      });
    },
  },

  'api-keys revoke': {
    synopsis: 'api-keys revoke ID',
    run: async (s, argv) => {
      const { id } = withId(argv);
      return s.apiKeys.revoke(id);
    },
  },

  // clients create, tokens issue, signing-keys rotate
  ...OAUTH_COMMANDS,

  'users delete': {
    synopsis: 'users delete ID',
    run: async (s, argv) => {
      const { id } = withId(argv);
      const deleted = await s.core.users.delete(SYSTEM_ACTOR, id);
      return { id: deleted.id, deleted_at: deleted.deletedAt };
    },
  },

  // webhooks create, list, delete, send-test, resend
  ...WEBHOOK_COMMANDS,
};
