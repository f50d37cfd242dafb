export type { ParsedProxyList, ProxyAddress, ProxyProtocol } from './proxy-address.js';
export {
  isProxyProtocol,
  PROXY_PROTOCOLS,
  parseProxyAddress,
  parseProxyList,
  redactProxyInput,
} from './proxy-address.js';
