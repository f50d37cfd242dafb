import type * as Polars from 'nodejs-polars';
import { requireOptional } from '../../optional-dependency.js';

export type PolarsModule = typeof Polars;
export type DataFrame = Polars.DataFrame;

/** nodejs-polars, loaded on first use (an optional peer dependency of @mocra/core). */
export function loadPolars(): PolarsModule {
  const mod = requireOptional<PolarsModule & { default?: PolarsModule }>('nodejs-polars', 'DataFrames');
  return mod.default ?? mod;
}
