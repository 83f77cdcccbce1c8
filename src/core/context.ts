import type { Logger } from "pino";
import type { Config } from "../config.js";
import { CredentialBox } from "../lib/credentials.js";
import { type MasterSecrets, resolveSecrets } from "../lib/secret.js";
import type { StoreSupervisor } from "../stores/supervisor.js";

/**
 * What every part of Vigil receives: configuration, logger, stores, clock and the credential box.
 * It holds infrastructure only. A feature that keeps state between calls (a cache, a counter)
 * owns it and keeps it per app with `perApp`, so the core never imports a feature.
 */
export interface AppContext {
  readonly config: Config;
  readonly log: Logger;
  readonly stores: StoreSupervisor;
  /** Current time; tests substitute a controllable clock. Use it, not `Date.now()`. */
  now: () => Date;
  readonly credentials: CredentialBox;
  /** The master secret in use and those still accepted (cursor and token keys derive from it). */
  readonly secrets: MasterSecrets;
  /** Per-app state of the features, see `perApp`. */
  readonly state: Map<symbol, unknown>;
}

export function createContext(config: Config, log: Logger, stores: StoreSupervisor): AppContext {
  const secrets = resolveSecrets(config, (msg) => log.warn(msg));
  return {
    config,
    log,
    stores,
    now: () => new Date(),
    credentials: new CredentialBox(secrets),
    secrets,
    state: new Map(),
  };
}

/** A feature's per-app state: `owned(ctx)` makes it on first use; `owned.set(ctx, v)` supplies it (tests). */
export interface PerApp<T> {
  (ctx: AppContext): T;
  set(ctx: AppContext, value: T): void;
}

/**
 * Declares state a feature keeps per app, e.g. `export const keyStore = perApp((ctx) => new
 * KeyStore(ctx))`. A value with a `close()` method is closed by `closeContext`.
 */
export function perApp<T>(make: (ctx: AppContext) => T): PerApp<T> {
  const slot = Symbol(make.name || "state");
  const get = ((ctx: AppContext) => {
    if (!ctx.state.has(slot)) ctx.state.set(slot, make(ctx));
    return ctx.state.get(slot) as T;
  }) as PerApp<T>;
  get.set = (ctx, value) => void ctx.state.set(slot, value);
  return get;
}

/** Stops the features' timers and writes what they hold (key last-use, …). */
export async function closeContext(ctx: AppContext): Promise<void> {
  for (const value of ctx.state.values()) {
    const close = (value as { close?: () => unknown } | null)?.close;
    if (typeof close === "function") await Promise.resolve(close.call(value)).catch(() => {});
  }
}
