import { parse, required } from '../cli/args.js';
import type { AdminCommand } from '../cli/commands.js';
import { UsageError } from '../cli/io.js';
import { SYSTEM_ACTOR } from '../domain/actor.js';
import { webhooksOf } from './index.js';

const positional = (argv: string[], usage: string): string => {
  const { positionals } = parse(argv, {}, 1);
  const id = positionals[0];
  if (!id) throw new UsageError(`usage: ${usage}`);
  return id;
};

/** `atrium webhooks ...`: operators act as the system, on any user's endpoints. */
export const WEBHOOK_COMMANDS: Record<string, AdminCommand> = {
  'webhooks create': async (s, argv) => {
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

  'webhooks list': async (s, argv) => {
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

  'webhooks delete': async (s, argv) => {
    const id = positional(argv, 'atrium webhooks delete ID');
    await webhooksOf(s).endpoints.delete(SYSTEM_ACTOR, id);
    return { id, deleted: true };
  },

  'webhooks send-test': async (s, argv) => {
    const { values, positionals } = parse(argv, { type: { type: 'string' } }, 1);
    const id = positionals[0];
    if (!id) throw new UsageError('usage: atrium webhooks send-test ID --type T');
    return webhooksOf(s).endpoints.sendTest(SYSTEM_ACTOR, id, required(values, 'type'));
  },

  'webhooks resend': async (s, argv) => {
    const { values, positionals } = parse(argv, { endpoint: { type: 'string' } }, 1);
    const id = positionals[0];
    if (!id) throw new UsageError('usage: atrium webhooks resend DELIVERY_ID --endpoint ENDPOINT_ID');
    return webhooksOf(s).deliveries.resend(SYSTEM_ACTOR, required(values, 'endpoint'), id);
  },
};
