/**
 * Summarises a V8 .cpuprofile (from BENCH_CPU_PROF, see bench/child.ts) by self time: shares per
 * package (a node_modules package, Atrium's own src/ directory, Node's internals, or V8's
 * pseudo-frames such as (garbage collector) and (idle)) and the functions with the most self time.
 *
 *   [PROFILE_SKIP_MS=n] node --import tsx bench/profile-summary.ts <file.cpuprofile> [top functions, default 25]
 *
 * Idle time is left out of the shares: they say where the busy time goes. The second table counts
 * a sample for every package on its stack (inclusive time: `graphql-yoga` there includes the
 * resolvers it ends up calling), so its shares do not add up to 100%.
 */
import { readFileSync } from 'node:fs';

interface ProfileNode {
  id: number;
  children?: number[];
  callFrame: { functionName: string; url: string; lineNumber: number };
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

/** `graphql`, `@envelop/core`, `atrium:graphql/pipeline`, `node:internal`, `(garbage collector)`. */
export function packageOf(url: string, functionName: string): string {
  if (!url) return functionName.startsWith('(') ? functionName : '(native)';
  const modules = url.lastIndexOf('/node_modules/');
  if (modules >= 0) {
    const parts = url.slice(modules + '/node_modules/'.length).split('/');
    return parts[0]!.startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0]!;
  }
  if (url.startsWith('node:')) return 'node:internal';
  const own = /\/(?:src|dist|bench)\/(.+)\/[^/]+$/.exec(url) ?? /\/(src|dist|bench)\/[^/]+$/.exec(url);
  if (own) return `atrium:${own[1]}`;
  return url;
}

function main(): void {
  const [file, topArg] = process.argv.slice(2);
  if (!file) throw new Error('usage: profile-summary <file.cpuprofile> [top]');
  const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const selfByNode = new Map<number, number>();
  // timeDeltas[i] is the time before sample i; the sampled frame ran for (roughly) that long.
  // PROFILE_SKIP_MS leaves out the first milliseconds (start-up: module loading, route and schema
  // compilation), which otherwise weigh on every package a server builds at start.
  const skipMicros = Number(process.env.PROFILE_SKIP_MS ?? 0) * 1000;
  let elapsed = 0;
  profile.samples.forEach((id, i) => {
    const delta = profile.timeDeltas[i] ?? 0;
    elapsed += delta;
    if (elapsed >= skipMicros) selfByNode.set(id, (selfByNode.get(id) ?? 0) + delta);
  });

  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const child of n.children ?? []) parent.set(child, n.id);

  const packages = new Map<string, number>();
  const inclusive = new Map<string, number>();
  const functions = new Map<string, number>();
  let busy = 0;
  let idle = 0;
  for (const [id, micros] of selfByNode) {
    const { functionName, url, lineNumber } = byId.get(id)!.callFrame;
    if (functionName === '(idle)') {
      idle += micros;
      continue;
    }
    busy += micros;
    const pkg = packageOf(url, functionName);
    packages.set(pkg, (packages.get(pkg) ?? 0) + micros);
    const onStack = new Set<string>();
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const frame = byId.get(at)!.callFrame;
      if (frame.functionName !== '(root)') onStack.add(packageOf(frame.url, frame.functionName));
    }
    for (const p of onStack) inclusive.set(p, (inclusive.get(p) ?? 0) + micros);
    const name = `${functionName || '(anonymous)'} ${pkg}${url ? `:${lineNumber + 1}` : ''}`;
    functions.set(name, (functions.get(name) ?? 0) + micros);
  }
  const pct = (micros: number) => `${((100 * micros) / busy).toFixed(1)}%`;
  const ms = (micros: number) => Math.round(micros / 1000);
  console.log(`${file}: busy ${ms(busy)} ms, idle ${ms(idle)} ms`);
  console.table(
    [...packages]
      .sort((a, b) => b[1] - a[1])
      .slice(0, 30)
      .map(([pkg, micros]) => ({ package: pkg, 'self ms': ms(micros), share: pct(micros) })),
  );
  console.table(
    [...inclusive]
      .sort((a, b) => b[1] - a[1])
      .slice(0, 30)
      .map(([pkg, micros]) => ({ 'package (inclusive)': pkg, ms: ms(micros), share: pct(micros) })),
  );
  console.table(
    [...functions]
      .sort((a, b) => b[1] - a[1])
      .slice(0, Number(topArg ?? 25))
      .map(([fn, micros]) => ({ function: fn, 'self ms': ms(micros), share: pct(micros) })),
  );
}

main();
