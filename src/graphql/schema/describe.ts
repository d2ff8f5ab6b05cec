/**
 * A number as the schema's descriptions write it (1,000). Descriptions interpolate the core's own
 * limits so that what introspection tells a client is what the core enforces: until 2026-11-28
 * `Query.users(limit)` said "1 to 100" while the core took 1 to 1,000.
 */
export const count = (n: number): string => n.toLocaleString('en-US');
