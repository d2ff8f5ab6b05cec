/**
 * Resolves once `condition` holds, asking every `everyMs`; rejects after `timeoutMs` with an error
 * that names `what`. For state that settles on its own time (a log line written, a pool emptied, a
 * delivery recorded), never to time anything: a test's figures of speed belong in bench/.
 */
export async function until(
  condition: () => boolean | Promise<boolean>,
  what: string,
  timeoutMs = 5_000,
  everyMs = 20,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`not within ${timeoutMs} ms: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}
