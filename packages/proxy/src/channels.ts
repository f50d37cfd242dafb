import { channel } from 'node:diagnostics_channel';

/**
 * `node:diagnostics_channel` channels, so internals are observable without logging. Messages
 * are published only when someone subscribes; they carry ids and display URLs, never passwords.
 *
 * | channel | message |
 * | --- | --- |
 * | `mocra:proxy:retired` | `{ id, provider, reason, consecutiveFailures }` |
 * | `mocra:proxy:expired` | `{ id, provider }` |
 * | `mocra:proxy:revived` | `{ id, provider }` |
 * | `mocra:proxy:loaded` | `{ provider, added, invalid, error? }` |
 * | `mocra:proxy:health-check` | `{ checked, healthy, failed, retired }` |
 * | `mocra:proxy:tier-changed` | `{ scope, from, to }` |
 */
export const proxyChannels = {
  retired: channel('mocra:proxy:retired'),
  expired: channel('mocra:proxy:expired'),
  revived: channel('mocra:proxy:revived'),
  loaded: channel('mocra:proxy:loaded'),
  healthCheck: channel('mocra:proxy:health-check'),
  tierChanged: channel('mocra:proxy:tier-changed'),
} as const;

export function publish(target: (typeof proxyChannels)[keyof typeof proxyChannels], message: object): void {
  if (target.hasSubscribers) target.publish(message);
}
