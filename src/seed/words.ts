/** Word lists for the demo data: small, plain, and enough for varied but believable content. */

const list = (text: string): readonly string[] => text.split(',').map((w) => w.trim());
const bars = (text: string): readonly string[] => text.split('|').map((w) => w.trim());

export const FIRST_NAMES = list(
  'Ada, Alan, Amara, Anika, Arjun, Beatriz, Bruno, Carmen, Chen, Chloe, Dara, David, Elena, ' +
    'Emeka, Farah, Felix, Grace, Hana, Hugo, Ines, Ivan, Jonas, Julia, Kai, Kenji, Lara, ' +
    'Leila, Liam, Lucia, Malik, Maya, Mateo, Mei, Nadia, Niko, Noah, Olga, Omar, Paula, Priya, ' +
    'Rafael, Rosa, Sami, Sara, Sofia, Tariq, Theo, Uma, Vera, Wei, Yara, Yusuf, Zoe, Zain',
);

export const LAST_NAMES = list(
  'Abbott, Adeyemi, Alvarez, Bauer, Becker, Bianchi, Castro, Chowdhury, Costa, Dubois, ' +
    'Eriksen, Fischer, Fontaine, Garcia, Haddad, Hansen, Ibrahim, Ito, Jansen, Kaur, Kim, ' +
    'Kowalski, Larsen, Lopez, Mensah, Moreau, Murphy, Nakamura, Novak, Okafor, Olsen, Park, ' +
    'Patel, Petrov, Quinn, Rossi, Sato, Schmidt, Silva, Singh, Tanaka, Torres, Varga, ' +
    'Virtanen, Wagner, Walsh, Weber, Yilmaz, Zhang, Zielinski',
);

export const ORGANIZATIONS = list(
  'Northwind Labs, Bluefin Analytics, Copperleaf Studio, Driftwood Systems, ' +
    'Evergreen Health, Foxglove Media, Granite Logistics, Harbor Robotics, Ironbark Energy, ' +
    'Juniper Education, Kestrel Finance, Lumen Retail',
);

export const TOPICS = list(
  'caching, cursor pagination, PostgreSQL indexes, SQLite WAL mode, rate limiting, webhooks, ' +
    'OAuth scopes, GraphQL subscriptions, TypeScript generics, idempotency keys, ' +
    'event sourcing, full-text search, feature flags, load testing, observability, ' +
    'database migrations, API versioning, background jobs, connection pooling, ' +
    'structured logging, code review, on-call rotations, schema design, accessibility, ' +
    'unit testing, dependency updates, monorepos, edge caching, gRPC streaming, ' +
    'incident reviews',
);

export const TITLE_TEMPLATES = list(
  'Notes on {t}, Why {t} matters, Getting started with {t}, Lessons from {t} in production, ' +
    '{T}: a field guide, What I learned about {t}, The case against {t}, ' +
    'Ten questions about {t}, Debugging {t}, {T} after one year, A short history of {t}, ' +
    'How we approach {t}',
);

export const TAGS = list(
  'backend, frontend, databases, postgresql, sqlite, typescript, node, graphql, rest, grpc, ' +
    'security, oauth, performance, testing, devops, observability, architecture, career, ' +
    'tutorial, opinion, release-notes, accessibility, design, culture',
);

export const SENTENCES = bars(
  'We tried {t} on the {s} service and it changed how we think about {m}. | ' +
    'The first surprise was how much {t} depends on good defaults. | ' +
    'Most of the work was not {t} itself but the {s} around it. | ' +
    'Our {m} improved once we measured it before and after. | ' +
    'A small experiment with {t} turned into a quarter-long project. | ' +
    'The documentation covers the happy path; production covers the rest. | ' +
    'If you only remember one thing, keep {t} boring and observable. | ' +
    'We wrote down every assumption and then tested each one. | ' +
    'The {s} team had solved half of this already, so we asked them first. | ' +
    'Rolling it out behind a flag let us back out twice without drama. | ' +
    'Numbers beat opinions: we graphed {m} for two weeks before deciding. | ' +
    'There is a trade-off here, and pretending otherwise helps nobody. | ' +
    'Edge cases found us faster than we found them. | ' +
    'In hindsight, the simplest version would have been enough for a year. | ' +
    'Reviewers asked good questions about failure modes, which shaped the design.',
);

export const SYSTEMS = list('billing, search, checkout, reporting, notifications, identity, inventory');
export const METRICS = list('latency, error rate, throughput, cost, on-call load, deploy time');

export const COMMENTS = bars(
  'Great write-up, thanks for sharing. | How does this compare to {t}? | ' +
    'We hit the same issue with {t} last month. | Did you measure the impact on {m}? | ' +
    'This matches our experience almost exactly. | ' +
    'Could you share the configuration you ended up with? | ' +
    'I would love a follow-up on the failure modes. | ' +
    'Bookmarked. The section on {t} is gold. | ' +
    'Respectfully disagree on the trade-off, but a good read. | ' +
    'Was the {s} team involved early on? | Short and useful. More of these, please. | ' +
    'The graphs make the argument. Nice work.',
);

export const PRODUCT_ADJECTIVES = list(
  'Ergonomic, Compact, Classic, Rugged, Modular, Portable, Quiet, Smart, Vintage, Minimal',
);
export const PRODUCT_MATERIALS = list('Walnut, Steel, Linen, Ceramic, Bamboo, Leather, Glass, Wool');
export const PRODUCT_NOUNS = list(
  'Desk Lamp, Notebook, Backpack, Mug, Keyboard, Headphones, Water Bottle, Chair, ' +
    'Monitor Stand, Plant Pot, Blanket, Wall Clock, Pen Set, Speaker, Cable Organizer',
);

export const STREETS = list(
  'Market Street, Harbour Road, Linden Avenue, Station Lane, Mill Road, Park Terrace, ' +
    'Church Street, Orchard Way, River Walk, King Street',
);

/** City, ISO 3166-1 alpha-2 country, and the currency an order shipped there is paid in. */
export const CITIES: ReadonlyArray<readonly [string, string, 'USD' | 'EUR' | 'GBP']> = [
  ['Portland', 'US', 'USD'],
  ['Austin', 'US', 'USD'],
  ['Chicago', 'US', 'USD'],
  ['Seattle', 'US', 'USD'],
  ['London', 'GB', 'GBP'],
  ['Manchester', 'GB', 'GBP'],
  ['Berlin', 'DE', 'EUR'],
  ['Lyon', 'FR', 'EUR'],
  ['Madrid', 'ES', 'EUR'],
  ['Utrecht', 'NL', 'EUR'],
  ['Helsinki', 'FI', 'EUR'],
  ['Dublin', 'IE', 'EUR'],
];
