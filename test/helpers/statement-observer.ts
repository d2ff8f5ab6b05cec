import type {
  KyselyPlugin,
  PluginTransformQueryArgs,
  PluginTransformResultArgs,
  QueryResult,
  RootOperationNode,
  UnknownRow,
} from 'kysely';

/**
 * A Kysely plugin (through `ServicesOptions.storePlugins`) that only looks: `onQuery` sees every
 * statement's tree before it runs, `onResult` every answer. Neither changes anything.
 */
export function observeStatements(observer: {
  onQuery?: (node: RootOperationNode) => void;
  onResult?: (result: QueryResult<UnknownRow>) => void;
}): KyselyPlugin {
  return {
    transformQuery({ node }: PluginTransformQueryArgs): RootOperationNode {
      observer.onQuery?.(node);
      return node;
    },
    transformResult({ result }: PluginTransformResultArgs): Promise<QueryResult<UnknownRow>> {
      observer.onResult?.(result);
      return Promise.resolve(result);
    },
  };
}
