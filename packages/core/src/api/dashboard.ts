/**
 * Finds and caches `dashboard.html`, the single-file dashboard (inline CSS and JS, no build
 * step, no CDN). It is read from disk, not bundled, so it stays one editable HTML file:
 *   - from sources: `src/api/dashboard.html`, next to this module;
 *   - from the built package: `dist/index.js` → `../src/api/dashboard.html` (the package ships
 *     `src`, see package.json `files`).
 */
import { readFileSync } from 'node:fs';
import { ApiUnavailableError } from '../errors.js';

const CANDIDATES = ['./dashboard.html', '../src/api/dashboard.html', './api/dashboard.html'];

let cached: string | undefined;

export function dashboardHtml(): string {
  if (cached !== undefined) return cached;
  const tried: string[] = [];
  for (const candidate of CANDIDATES) {
    const url = new URL(candidate, import.meta.url);
    try {
      cached = readFileSync(url, 'utf8');
      return cached;
    } catch {
      tried.push(url.pathname);
    }
  }
  throw new ApiUnavailableError(
    `the dashboard page is missing from this install (looked in ${tried.join(', ')})`,
  );
}
