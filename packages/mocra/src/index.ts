/**
 * The mocra facade. `export *` is allowed here and only here: the prelude lists what it
 * re-exports by name, so this line exposes exactly that.
 *
 * @module mocra
 */
export * from './prelude.js';
