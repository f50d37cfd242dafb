// Runs the fixture site in its own process (so serving pages does not compete with the
// crawler's event loop) and prints its URL on stdout.
import { startFixtureSite } from '@mocra/testkit';

const site = await startFixtureSite();
process.stdout.write(`${site.url}\n`);
process.on('SIGTERM', () => {
  void site.close().then(() => process.exit(0));
});
