import { parse, required, withId } from '../cli/args.js';
import type { AdminCommand } from '../cli/commands.js';
import { SYSTEM_ACTOR } from '../domain/actor.js';
import { UsageError } from '../cli/io.js';
import { webhooksOf } from './index.js';

/**
 * `--events a,b`. Left out, the endpoint hears every event (REST's empty list means the same); given
 * with no name in it (`--events ,` or `--events ""`, a script's empty variable) it is refused rather
 * than read as "every event", the opposite of what a script that meant to name some would want.
 */
function eventList(value: string | undefined): string[] | undefined {
  if (value === undefined) return undefined;
  const events = value
    .split(',')
    .map((e) => e.trim())
    .filter((e) => e !== '');
  if (events.length === 0)
    throw new UsageError('--events needs at least one event type (leave it out for all)');
  return events;
}

/** `atrium webhooks ...`: operators act as the system, on any user's endpoints. */
export const WEBHOOK_COMMANDS: Record<string, AdminCommand> = {
  'webhooks create': {
    synopsis: 'webhooks create --url URL [--events a,b] --user ID',
    prepare: (argv) => {
      const { values } = parse(argv, {
        url: { type: 'string' },
        events: { type: 'string' },
        user: { type: 'string' },
      });
      const input = {
        url: required(values, 'url'),
        events: eventList(values.events),
        userId: required(values, 'user'),
      };
      return async (s) => {
        const created = await webhooksOf(s).endpoints.create(SYSTEM_ACTOR, input);
        return { id: created.id, url: created.url, events: created.events, secret: created.secret };
      };
    },
  },

  'webhooks list': {
    synopsis: 'webhooks list --user ID',
    prepare: (argv) => {
      const { values } = parse(argv, { user: { type: 'string' } });
      const userId = required(values, 'user');
      return async (s) => {
        const { endpoints } = webhooksOf(s);
        const data = [];
        let cursor: string | undefined;
        do {
          const page = await endpoints.list(SYSTEM_ACTOR, { userId, limit: 100, cursor });
          data.push(...page.data);
          cursor = page.nextCursor ?? undefined;
        } while (cursor);
        return { data };
      };
    },
  },

  'webhooks delete': {
    synopsis: 'webhooks delete ID',
    prepare: (argv) => {
      const { id } = withId(argv);
      return async (s) => {
        await webhooksOf(s).endpoints.delete(SYSTEM_ACTOR, id);
        return { id, deleted: true };
      };
    },
  },

  'webhooks send-test': {
    synopsis: 'webhooks send-test ID --type T',
    prepare: (argv) => {
      const { id, values } = withId(argv, { type: { type: 'string' } });
      const type = required(values, 'type');
      return (s) => webhooksOf(s).endpoints.sendTest(SYSTEM_ACTOR, id, type);
    },
  },

  'webhooks resend': {
    synopsis: 'webhooks resend DELIVERY_ID --endpoint ENDPOINT_ID',
    prepare: (argv) => {
      const { id, values } = withId(argv, {
        endpoint: { type: 'string' },
      });
      const endpointId = required(values, 'endpoint');
      return (s) => webhooksOf(s).deliveries.resend(SYSTEM_ACTOR, endpointId, id);
    },
  },
};
