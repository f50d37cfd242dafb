export { classifyProxyError } from './classify-error.js';
export type { ProxyDispatchersOptions } from './proxy-dispatchers.js';
export { createProxyDispatchers, ProxyDispatchers } from './proxy-dispatchers.js';
