import type { Random } from './random.js';
import {
  COMMENTS,
  METRICS,
  PRODUCT_ADJECTIVES,
  PRODUCT_MATERIALS,
  PRODUCT_NOUNS,
  SENTENCES,
  SYSTEMS,
  TAGS,
  TITLE_TEMPLATES,
  TOPICS,
} from './words.js';

/** Text for posts, comments and products, built from the word lists by the seeded generator. */

const capitalise = (s: string) => s.charAt(0).toUpperCase() + s.slice(1);

function fill(template: string, r: Random, topic: string): string {
  return template
    .replaceAll('{T}', capitalise(topic))
    .replaceAll('{t}', topic)
    .replaceAll('{s}', r.pick(SYSTEMS))
    .replaceAll('{m}', r.pick(METRICS));
}

export interface PostText {
  title: string;
  body: string;
  tags: string[];
}

export function postText(r: Random): PostText {
  const topic = r.pick(TOPICS);
  const paragraphs = Array.from({ length: r.int(2, 4) }, () =>
    Array.from({ length: r.int(2, 5) }, () => fill(r.pick(SENTENCES), r, topic)).join(' '),
  );
  return {
    title: fill(r.pick(TITLE_TEMPLATES), r, topic),
    body: paragraphs.join('\n\n'),
    tags: r.sample(TAGS, r.int(1, 4)),
  };
}

export function commentText(r: Random): string {
  const text = fill(r.pick(COMMENTS), r, r.pick(TOPICS));
  return r.chance(0.3) ? `${text} ${fill(r.pick(SENTENCES), r, r.pick(TOPICS))}` : text;
}

/** `count` distinct product names with prices from $4.99 to $249.99 ending in .99 or .00. */
export function productCatalogue(r: Random, count: number): { name: string; priceCents: number }[] {
  const names = new Set<string>();
  const out: { name: string; priceCents: number }[] = [];
  while (out.length < count) {
    const name = `${r.pick(PRODUCT_ADJECTIVES)} ${r.pick(PRODUCT_MATERIALS)} ${r.pick(PRODUCT_NOUNS)}`;
    if (names.has(name)) continue;
    names.add(name);
    const dollars = r.weighted([
      [r.int(4, 19), 4],
      [r.int(20, 79), 4],
      [r.int(80, 249), 2],
    ] as const);
    out.push({ name, priceCents: dollars * 100 + (r.chance(0.8) ? 99 : 0) });
  }
  return out;
}
