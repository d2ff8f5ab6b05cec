import { GraphQLError } from 'graphql';
import type { Plugin } from 'graphql-yoga';

/**
 * Yoga reads the `variables` and `extensions` of a GET (or form-encoded POST) with a bare
 * JSON.parse, so malformed JSON there would surface as a SyntaxError and be masked as
 * INTERNAL_SERVER_ERROR. It is the client's request error, answered like a malformed JSON body:
 * 400, BAD_REQUEST, naming the parameter.
 */
export const malformedParamsPlugin: Plugin = {
  onRequestParse({ request, requestParser, setRequestParser }) {
    if (!requestParser) return;
    setRequestParser(async (req) => {
      try {
        return await requestParser(req);
      } catch (err) {
        if (!(err instanceof SyntaxError)) throw err;
        const search = new URL(request.url, 'http://localhost').searchParams;
        const names = ['variables', 'extensions'].filter((name) => {
          const value = search.get(name);
          if (!value) return false;
          try {
            JSON.parse(value);
            return false;
          } catch {
            return true;
          }
        });
        const which = names.length > 0 ? names.join(' and ') : 'variables or extensions';
        throw new GraphQLError(`The ${which} parameter is not valid JSON.`, {
          extensions: { code: 'BAD_REQUEST', http: { status: 400 } },
        });
      }
    });
  },
};
