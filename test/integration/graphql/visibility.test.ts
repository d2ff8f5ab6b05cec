import { beforeAll, describe, expect, it } from 'vitest';
import { codes, type GraphQLServer, graphQLServerForSuite } from './support.js';

type Caller = Awaited<ReturnType<GraphQLServer['atrium']['caller']>>;

describe('GraphQL visibility of drafts and scheduled posts', () => {
  const s = graphQLServerForSuite();
  let author: Caller;
  let reader: Caller;
  let admin: Caller;
  let published: string;
  let draft: string;
  let scheduled: string;
  let draftComment: string;
  beforeAll(async () => {
    author = await s.atrium.caller({ handle: 'visauthor' });
    reader = await s.atrium.caller({ handle: 'visreader' });
    admin = await s.atrium.caller({ role: 'admin', handle: 'visadmin' });
    const actor = { id: author.userId, kind: 'user' as const, role: 'member' as const };
    const posts = s.atrium.services.core.posts;
    published = (await posts.create(actor, { title: 'Quokka public', body: 'out', authorId: author.userId }))
      .id;
    draft = (
      await posts.create(actor, {
        title: 'Quokka draft',
        body: 'wip',
        authorId: author.userId,
        publishAt: null,
      })
    ).id;
    scheduled = (
      await posts.create(actor, {
        title: 'Quokka later',
        body: 'soon',
        authorId: author.userId,
        publishAt: '2999-01-01T00:00:00Z',
      })
    ).id;
    draftComment = (
      await s.atrium.services.core.comments.add(actor, {
        body: 'quokka note',
        authorId: author.userId,
        postId: draft,
      })
    ).id;
  });

  const listed = async (who: Caller | null) => {
    const res = await s.gql('{ posts { totalCount edges { node { id } } } }', {}, who?.headers ?? {});
    const page = res.data!.posts as { totalCount: number; edges: Array<{ node: { id: string } }> };
    return { ids: page.edges.map((e) => e.node.id), total: page.totalCount };
  };

  it('posts and totalCount hide drafts and scheduled posts from others, anonymous callers included', async () => {
    expect(await listed(reader)).toEqual({ ids: [published], total: 1 });
    expect(await listed(null)).toEqual({ ids: [published], total: 1 });
    expect(await listed(author)).toEqual({ ids: [scheduled, draft, published], total: 3 });
    expect(await listed(admin)).toEqual({ ids: [scheduled, draft, published], total: 3 });
  });

  it('post(id) and node(id) of a hidden post are null for others, without an error', async () => {
    for (const id of [draft, scheduled]) {
      for (const q of [
        'query($id: ID!) { post(id: $id) { id } }',
        'query($id: ID!) { node(id: $id) { id } }',
      ]) {
        const other = await s.gql(q, { id }, reader.headers);
        expect(other.errors).toBeUndefined();
        expect(Object.values(other.data!)).toEqual([null]);
        const own = await s.gql(q, { id }, author.headers);
        expect(Object.values(own.data!)).toEqual([{ id }]);
      }
    }
    const comment = await s.gql(
      'query($id: ID!) { node(id: $id) { id } }',
      { id: draftComment },
      reader.headers,
    );
    expect(comment.data).toEqual({ node: null });
  });

  it('User.posts and search apply the same rule', async () => {
    const q = 'query($id: ID!) { user(id: $id) { posts { totalCount edges { node { id } } } } }';
    const other = await s.gql(q, { id: author.userId }, reader.headers);
    expect(other.data).toEqual({ user: { posts: { totalCount: 1, edges: [{ node: { id: published } }] } } });
    const own = await s.gql(q, { id: author.userId }, author.headers);
    expect((own.data!.user as { posts: { totalCount: number } }).posts.totalCount).toBe(3);
    const search =
      'query { search(query: "quokka") { __typename ... on Post { id } ... on Comment { id } } }';
    const hidden = await s.gql(search, {}, reader.headers);
    expect(hidden.data).toEqual({ search: [{ __typename: 'Post', id: published }] });
    const all = await s.gql(search, {}, author.headers);
    expect((all.data!.search as unknown[]).length).toBe(4);
  });

  it('nobody comments on a post they cannot see: NOT_FOUND, as for a missing post', async () => {
    const res = await s.gql(
      'mutation($in: AddCommentInput!) { addComment(input: $in) { comment { id } errors { field message } } }',
      { in: { body: 'sneaky', authorId: reader.userId, postId: draft } },
      reader.headers,
    );
    expect(res.data).toBeNull();
    expect(codes(res)).toEqual(['NOT_FOUND']);
    const update = await s.gql(
      'mutation($id: ID!) { updatePost(id: $id, input: { title: "x" }) { errors { field } } }',
      { id: draft },
      reader.headers,
    );
    expect(codes(update)).toEqual(['NOT_FOUND']);
  });
});
