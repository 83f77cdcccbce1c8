import { discord } from "./discord.js";
import { ntfy } from "./ntfy.js";
import { opsgenie } from "./opsgenie.js";
import { pagerduty } from "./pagerduty.js";
import { slack } from "./slack.js";
import { teams } from "./teams.js";
import { telegram } from "./telegram.js";
import type { Provider, ProviderType } from "./types.js";

/**
 * Every provider module by channel type. Each one's settings type is its own; callers hold
 * settings their schema parsed, so the map forgets the types (`Provider<any>`: a settings object
 * from `settings.parse` goes back into the same provider's `request`, `hint` and `interpret`).
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyProvider = Provider<any>;

export const PROVIDERS: Record<ProviderType, AnyProvider> = {
  slack,
  teams,
  discord,
  pagerduty,
  opsgenie,
  telegram,
  ntfy,
};

/** The provider module of a channel type. */
export function providerOf(type: ProviderType): AnyProvider {
  const p = PROVIDERS[type] as AnyProvider | undefined;
  if (!p) throw new Error(`no provider for channel type ${String(type)}`);
  return p;
}

/** Whether a channel type is sent through a provider module (not email, not a signed webhook). */
export const isProviderType = (type: string): type is ProviderType => Object.hasOwn(PROVIDERS, type);
