import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Actor, SYSTEM_ACTOR } from '../../src/domain/actor.js';
import { DomainError } from '../../src/domain/errors.js';
import { ftsMatchExpression, searchTokens } from '../../src/domain/search.js';
import { startCore, type TestCore } from './support/core.js';

describe('searchTokens', () => {
  it('keeps letters and digits only, lower-cased, and caps the number of words', () => {
    expect(searchTokens('Hello, "World"* AND (x) NEAR/3 c++ e-mail')).toEqual([
      'hello',
      'world',
      'and',
      'x',
      'near',
      '3',
      'c',
      'e',
      'mail',
    ]);
    expect(searchTokens('  ')).toEqual([]);
    expect(searchTokens('Ünïcödé naïve 東京')).toEqual(['ünïcödé', 'naïve', '東京']);
    expect(searchTokens('a '.repeat(100))).toHaveLength(16);
  });

  it('splits at every punctuation character, as the indexed text is split on both engines', () => {
    expect(searchTokens('alice@example.org README.md node.js v20.1 -42 john-2024')).toEqual([
      'alice',
      'example',
      'org',
      'readme',
      'md',
      'node',
      'js',
      'v20',
      '1',
      '42',
      'john',
      '2024',
    ]);
  });

  it('lower-cases each character as PostgreSQL does: İ to a plain i, a final Σ to σ; other marks stay', () => {
    expect(searchTokens('İstanbul ΟΔΟΣ')).toEqual(['istanbul', 'οδοσ']);
    expect(searchTokens('cafe\u0301 x\u0301')).toEqual(['café', 'x\u0301']);
  });

  it('quotes every word so FTS5 never sees an operator', () => {
    expect(ftsMatchExpression(['near', 'and'])).toBe('"near" "and"');
  });
});

describe('SearchService', () => {
  let t: TestCore;
  let ada: Actor;
  let postId: string;
  let olderPostId: string;
  let commentId: string;

  beforeAll(async () => {
    t = await startCore();
    ada = (await t.user('member', 'ada_lovelace')).actor;
    await t.core.users.update(ada, ada.id, { name: 'Ada Lovelace' });
    olderPostId = (
      await t.core.posts.create(ada, {
        title: 'Engines of thought',
        body: 'The analytical engine weaves patterns.',
        authorId: ada.id,
      })
    ).id;
    t.clock.advance(1000);
    postId = (
      await t.core.posts.create(ada, {
        title: 'Notes on the analytical engine',
        body: 'Bernoulli numbers computed by the analytical engine, engine, engine.',
        authorId: ada.id,
      })
    ).id;
    commentId = (
      await t.core.comments.add(ada, {
        body: 'Poetical science needs imagination.',
        authorId: ada.id,
        postId,
      })
    ).id;
  });
  afterAll(async () => {
    await t.stop();
  });

  it('finds users by handle and name, posts by title and body, comments by body', async () => {
    // Users are found by callers who may list them (D22's search rule); an anonymous one finds none.
    expect(await t.core.search.search(SYSTEM_ACTOR, 'lovelace')).toEqual([
      { kind: 'user', id: ada.id, score: expect.any(Number) },
    ]);
    expect(await t.core.search.search(null, 'lovelace')).toEqual([]);
    expect((await t.core.search.search(null, 'Bernoulli')).map((h) => h.id)).toEqual([postId]);
    expect((await t.core.search.search(null, 'imagination')).map((h) => [h.kind, h.id])).toEqual([
      ['comment', commentId],
    ]);
  });

  it('requires every word, and stems English words in posts and comments', async () => {
    expect((await t.core.search.search(null, 'analytical bernoulli')).map((h) => h.id)).toEqual([postId]);
    expect(await t.core.search.search(null, 'analytical unicorn')).toEqual([]);
    expect((await t.core.search.search(null, 'imagine')).map((h) => h.id)).toContain(commentId);
  });

  it('ranks the more relevant post first and reports scores in descending order', async () => {
    const hits = await t.core.search.search(null, 'engine');
    expect(hits.map((h) => h.id)).toEqual([postId, olderPostId]);
    expect(hits[0]!.score).toBeGreaterThanOrEqual(hits[1]!.score);
  });

  it('honours the limit and refuses limits outside 1 to 100', async () => {
    expect(await t.core.search.search(null, 'engine', 1)).toHaveLength(1);
    for (const limit of [0, 101, 2.5]) {
      const err = await t.core.search.search(null, 'engine', limit).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(DomainError);
      expect((err as DomainError).details[0]).toMatchObject({ field: 'limit', code: 'range_error' });
    }
  });

  it('never fails on hostile input', async () => {
    const hostile = [
      '"',
      '""',
      '*',
      'AND (',
      'NEAR',
      'NEAR(engine notes, 2)',
      'OR',
      'NOT engine',
      '-engine',
      'title:engine',
      '^engine',
      'engine*',
      "'; drop table posts; --",
      '(((',
      '!@#$%^&*()',
      'x'.repeat(10_000),
      '',
      '   ',
    ];
    for (const q of hostile) {
      const hits = await t.core.search.search(null, q);
      expect(Array.isArray(hits)).toBe(true);
    }
    expect(await t.core.search.search(null, '')).toEqual([]);
    // Control characters (NUL among them) are refused by the core's text rule on every engine.
    for (const q of ['\u0000\u0001', 'engine\u0000', '\u0000']) {
      await expect(t.core.search.search(null, q), JSON.stringify(q)).rejects.toMatchObject({
        code: 'validation_error',
        details: [{ field: 'query', code: 'invalid_characters' }],
      });
    }
    // Operators are plain words: "engine NEAR unicorn" and "engine AND unicorn" need a word no post
    // holds. (PostgreSQL drops English stop words such as "not" and "and"; SQLite keeps them.)
    expect(await t.core.search.search(null, 'engine NEAR unicorn')).toEqual([]);
    expect(await t.core.search.search(null, 'engine AND unicorn')).toEqual([]);
    expect(await t.core.search.search(null, 'engine OR unicorn')).toEqual([]);
    expect((await t.core.search.search(null, 'engine*')).map((h) => h.id)).toEqual([postId, olderPostId]);
    expect((await t.core.search.search(null, 'title:engine')).length).toBe(0);
  });

  it('forgets deleted posts and their comments, and follows edits', async () => {
    const temp = await t.core.posts.create(ada, { title: 'Zeppelin', body: 'airship', authorId: ada.id });
    const c = await t.core.comments.add(ada, { body: 'zeppelin ride', authorId: ada.id, postId: temp.id });
    expect((await t.core.search.search(null, 'zeppelin')).map((h) => h.id).sort()).toEqual(
      [c.id, temp.id].sort(),
    );
    await t.core.posts.update(ada, temp.id, { title: 'Blimp' });
    expect((await t.core.search.search(null, 'zeppelin')).map((h) => h.id)).toEqual([c.id]);
    await t.core.posts.delete(ada, temp.id);
    expect(await t.core.search.search(null, 'zeppelin')).toEqual([]);
    expect(await t.core.search.search(null, 'blimp')).toEqual([]);
  });

  it('finds the same rows on both engines: words written with punctuation, decomposed text, İ', async () => {
    // Each word of the stored text, typed alone or as written, finds it. PostgreSQL's parser used to
    // keep e-mail addresses, URLs, file names, versions and signed numbers as single lexemes, which
    // the query (split at punctuation) never matched; text stored decomposed (NFD) and words
    // starting with İ were not found there either. SQLite always found all of these.
    const body =
      'Mail alice@example.org or visit https://docs.example.net/guide/setup.html and read README.md; node.js v20.1 3.14159 -42';
    const post = await t.core.posts.create(ada, { title: 'Punctuated', body, authorId: ada.id });
    const comment = await t.core.comments.add(ada, { body, authorId: ada.id, postId });
    const nfd = await t.core.posts.create(ada, { title: 'Cafe\u0301 au lait', body: 'x', authorId: ada.id });
    const city = await t.core.posts.create(ada, { title: 'İstanbul by night', body: 'x', authorId: ada.id });
    const { user } = await t.user('member', 'john-2024');
    await t.core.users.update(SYSTEM_ACTOR, user.id, { name: 'İlker Ünal' });
    const expected: Array<[string, string[]]> = [
      ...[
        'alice',
        'alice@example.org',
        'README.md',
        'node.js',
        'js',
        'v20',
        'v20.1',
        '3.14159',
        '42',
        '-42',
        'setup.html',
        'docs.example.net',
        'https://docs.example.net/guide/setup.html',
      ].map((q): [string, string[]] => [q, [post.id, comment.id]]),
      ['café', [nfd.id]],
      ['Cafe\u0301', [nfd.id]],
      ['İstanbul', [city.id]],
      ['istanbul', [city.id]],
      ...['john-2024', 'john', '2024', 'İlker', 'ilker'].map((q): [string, string[]] => [q, [user.id]]),
    ];
    // Every query checked, then every miss named at once.
    const misses: string[] = [];
    for (const [q, ids] of expected) {
      const found = (await t.core.search.search(SYSTEM_ACTOR, q)).map((h) => h.id);
      if (ids.some((id) => !found.includes(id))) misses.push(q);
    }
    expect(misses).toEqual([]);
    for (const id of [post.id, nfd.id, city.id]) await t.core.posts.delete(ada, id);
  });

  it('leaves out soft-deleted users', async () => {
    const { user } = await t.user('member', 'grace_hopper');
    expect((await t.core.search.search(SYSTEM_ACTOR, 'grace')).map((h) => h.id)).toEqual([user.id]);
    await t.core.users.delete(SYSTEM_ACTOR, user.id);
    expect(await t.core.search.search(SYSTEM_ACTOR, 'grace')).toEqual([]);
  });
});
