import { parse, required, withId } from '../cli/args.js';
import type { AdminCommand } from '../cli/commands.js';
import { SYSTEM_ACTOR } from '../domain/actor.js';
import { webhooksOf } from './index.js';

/** `atrium webhooks ...`: operators act as the system, on any user's endpoints. */
export const WEBHOOK_COMMANDS: Record<string, AdminCommand> = {
  'webhooks create': {
    synopsis: 'webhooks create --url URL [--events a,b] --user ID',
    run: async (s, argv) => {
      const { values } = parse(argv, {
        url: { type: 'string' },
        events: { type: 'string' },
        user: { type: 'string' },
      });
      const events = values.events
        ?.split(',')
        .map((e) => e.trim())
        .filter((e) => e !== '');
      const created = await webhooksOf(s).endpoints.create(SYSTEM_ACTOR, {
        url: required(values, 'url'),
        events,
        userId: required(values, 'user'),
      });
      return { id: created.id, url: created.url, events: created.events, secret: created.secret };
    },
  },

  'webhooks list': {
    synopsis: 'webhooks list --user ID',
    run: async (s, argv) => {
      const { values } = parse(argv, { user: { type: 'string' } });
      const { endpoints } = webhooksOf(s);
      const userId = required(values, 'user');
      const data = [];
      let cursor: string | undefined;
      do {
        const page = await endpoints.list(SYSTEM_ACTOR, { userId, limit: 100, cursor });
        data.push(...page.data);
        cursor = page.nextCursor ?? undefined;
      } while (cursor);
      return { data };
    },
  },

  'webhooks delete': {
    synopsis: 'webhooks delete ID',
    run: async (s, argv) => {
      const { id } = withId(argv);
      await webhooksOf(s).endpoints.delete(SYSTEM_ACTOR, id);
      return { id, deleted: true };
    },
  },

  'webhooks send-test': {
    synopsis: 'webhooks send-test ID --type T',
    run: async (s, argv) => {
      const { id, values } = withId(argv, { type: { type: 'string' } });
      return webhooksOf(s).endpoints.sendTest(SYSTEM_ACTOR, id, required(values, 'type'));
    },
  },

  'webhooks resend': {
    synopsis: 'webhooks resend DELIVERY_ID --endpoint ENDPOINT_ID',
    run: async (s, argv) => {
      const { id, values } = withId(argv, {
        endpoint: { type: 'string' },
      });
      return webhooksOf(s).deliveries.resend(SYSTEM_ACTOR, required(values, 'endpoint'), id);
    },
  },
};
