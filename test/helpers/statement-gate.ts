import type {
  KyselyPlugin,
  OperationNode,
  PluginTransformQueryArgs,
  PluginTransformResultArgs,
  QueryResult,
  RootOperationNode,
  UnknownRow,
} from 'kysely';

type Kind = 'SelectQueryNode' | 'InsertQueryNode' | 'UpdateQueryNode' | 'DeleteQueryNode';

interface Watch {
  kind: Kind;
  table: string;
  hold: boolean;
  reached: () => void;
  release: Promise<void>;
}

export interface Held {
  /** Resolves once a matching statement has run and is being held (or observed). */
  reached: Promise<void>;
  /** Lets the held statement's result go back to the caller. */
  release(): void;
}

/**
 * A Kysely plugin (installed through `ServicesOptions.storePlugins`) that holds the result of the
 * next statement of a given kind on a given table until the test releases it: the statement has
 * run, its transaction is open, and the code that issued it waits. Nothing in the product changes.
 */
export class StatementGate implements KyselyPlugin {
  readonly #watches: Watch[] = [];
  readonly #matched = new Map<string, Watch>();

  /** Holds the next matching statement after it has run. */
  hold(kind: Kind, table: string): Held {
    return this.#watch(kind, table, true);
  }

  /** Resolves when the next matching statement has run; holds nothing. */
  observe(kind: Kind, table: string): Promise<void> {
    return this.#watch(kind, table, false).reached;
  }

  transformQuery({ node, queryId }: PluginTransformQueryArgs): RootOperationNode {
    const index = this.#watches.findIndex((w) => w.kind === node.kind && w.table === tableOf(node));
    if (index >= 0) {
      this.#matched.set(queryId.queryId, this.#watches[index]!);
      this.#watches.splice(index, 1);
    }
    return node;
  }

  async transformResult({ queryId, result }: PluginTransformResultArgs): Promise<QueryResult<UnknownRow>> {
    const watch = this.#matched.get(queryId.queryId);
    if (watch) {
      this.#matched.delete(queryId.queryId);
      watch.reached();
      if (watch.hold) await watch.release;
    }
    return result;
  }

  #watch(kind: Kind, table: string, hold: boolean): Held {
    let reached!: () => void;
    let release!: () => void;
    const reachedPromise = new Promise<void>((resolve) => (reached = resolve));
    const releasePromise = new Promise<void>((resolve) => (release = resolve));
    this.#watches.push({ kind, table, hold, reached, release: releasePromise });
    return { reached: reachedPromise, release };
  }
}

/** The table a statement reads or writes first (enough for the statements tests watch). */
function tableOf(node: RootOperationNode): string | undefined {
  const name = (n: OperationNode | undefined): string | undefined => {
    if (n === undefined) return undefined;
    if (n.kind === 'TableNode')
      return (n as unknown as { table: { identifier: { name: string } } }).table.identifier.name;
    if (n.kind === 'AliasNode') return name((n as unknown as { node: OperationNode }).node);
    return undefined;
  };
  switch (node.kind) {
    case 'InsertQueryNode':
      return name(node.into);
    case 'UpdateQueryNode':
      return name(node.table);
    case 'DeleteQueryNode':
      return name(node.from.froms[0]);
    case 'SelectQueryNode':
      return name(node.from?.froms[0]);
    default:
      return undefined;
  }
}
