export type { DownloadFn, SessionFetchOptions } from './fetch.js';
export { downloadWithSession } from './fetch.js';
export type {
  EnsureLoggedInOptions,
  LoginContext,
  LoginHook,
  LoginResult,
  SessionGoneRule,
} from './login.js';
export { checkSession, ensureLoggedIn, isSessionGone } from './login.js';
export type { LoginInfo, NowFn, SessionStoreOptions } from './session.js';
export { createSessionStore, Session, SessionStore } from './session.js';
