import { storeConformance } from './conformance.js';
import { sqliteFactory } from './helpers.js';

storeConformance('sqlite (better-sqlite3, temp file)', sqliteFactory());
