// Deterministic simulation, part 4 of 4 (see test/sim/seed-suite.ts for the seed window).
import { describe } from 'vitest';
import { defineSeedSuite } from './sim/seed-suite.js';

describe('simulator seeds, part 4', () => defineSeedSuite(3));
