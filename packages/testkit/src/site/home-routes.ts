/** The home page `/`: links to the catalog, the quotes site and the two robots.txt test pages. */
import { HTML_TYPE, htmlPage } from '../content/html.js';
import type { RouteRegistrar } from './context.js';

/** Paths the home page links to, in order. */
export const HOME_LINKS = [
  '/books/page/1',
  '/quotes/page/1',
  '/private/secret',
  '/private/public/notice',
] as const;

export const registerHomeRoutes: RouteRegistrar = (app) => {
  const home = htmlPage(
    'mocra fixture site',
    `<main class="home">
<h1>mocra fixture site</h1>
<p>A generated, deterministic web site for testing crawlers offline.</p>
<ul class="sections">
<li><a href="${HOME_LINKS[0]}">Book catalog</a></li>
<li><a href="${HOME_LINKS[1]}">Quotes</a></li>
<li><a href="${HOME_LINKS[2]}">A page robots.txt disallows</a></li>
<li><a href="${HOME_LINKS[3]}">A page robots.txt allows inside a disallowed folder</a></li>
</ul>
</main>`,
  );
  app.get('/', (_req, reply) => reply.type(HTML_TYPE).send(home));
};
