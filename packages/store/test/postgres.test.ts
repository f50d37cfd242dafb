import { storeConformance } from './conformance.js';
import { postgresFactory } from './helpers.js';

storeConformance('postgres (pg, unique schema per test)', postgresFactory);
