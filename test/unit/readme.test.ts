import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { withTable } from '../../scripts/config-docs.js';

describe('README', () => {
  const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');

  it('shows the two commands at the top', () => {
    const head = readme.split('\n').slice(0, 20).join('\n');
    expect(head).toContain('npm install && npm start');
    expect(head).toContain('npm test');
  });

  it('lists every configuration variable as the parser defines it (run npm run docs:config)', () => {
    expect(withTable(readme)).toBe(readme);
  });
});
