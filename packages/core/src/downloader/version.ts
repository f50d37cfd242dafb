import pkg from '../../package.json' with { type: 'json' };

/** The version of @mocra/core (the default User-Agent names it). */
export const MOCRA_VERSION: string = pkg.version;

/** `mocra/<version> (+https://github.com/mocra-ts/mocra)` */
export const DEFAULT_USER_AGENT = `mocra/${MOCRA_VERSION} (+https://github.com/mocra-ts/mocra)`;
