import { type ChildProcess, spawn } from "node:child_process";
import path from "node:path";
import type { Test } from "tap";
import { packageRoot } from "../../src/lib/paths.js";

export const CLI = path.join(packageRoot, "dist/src/cli.js");

export interface Running {
  proc: ChildProcess;
  /** Everything printed so far, stdout and stderr together. */
  output(): string;
  /** Resolves with the first output match, or rejects after `ms`. */
  waitFor(pattern: RegExp, ms?: number): Promise<RegExpMatchArray>;
  /** Resolves with the exit code (or signal) once the process has exited. */
  exited(ms?: number): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Runs the built `vigil` with only the environment given (plus PATH and HOME). */
export function spawnVigil(t: Test, args: string[], env: Record<string, string> = {}): Running {
  const proc = spawn(process.execPath, [CLI, ...args], {
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", LOG_LEVEL: "info", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  const listeners = new Set<() => void>();
  const onData = (d: Buffer) => {
    out += d.toString();
    for (const l of listeners) l();
  };
  proc.stdout?.on("data", onData);
  proc.stderr?.on("data", onData);
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    proc.on("exit", (code, signal) => resolve({ code, signal })),
  );
  t.teardown(() => {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGKILL");
  });
  return {
    proc,
    output: () => out,
    waitFor(pattern, ms = 20_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const m = out.match(pattern);
          if (m) {
            listeners.delete(check);
            clearTimeout(timer);
            resolve(m);
          }
        };
        const timer = setTimeout(() => {
          listeners.delete(check);
          reject(new Error(`timed out waiting for ${pattern}; output so far:\n${out}`));
        }, ms);
        listeners.add(check);
        check();
      });
    },
    exited(ms = 20_000) {
      return Promise.race([
        exit,
        new Promise<never>((_, reject) =>
          setTimeout(
            () => reject(new Error(`process did not exit within ${ms} ms; output:\n${out}`)),
            ms,
          ).unref(),
        ),
      ]);
    },
  };
}

/** Starts `vigil serve` on a free port and resolves with its base URL once it listens. */
export async function serveOnFreePort(t: Test, env: Record<string, string>, args: string[] = []) {
  const running = spawnVigil(t, ["serve", ...args], { PORT: "0", ...env });
  const m = await running.waitFor(/Server listening at (http:\/\/127\.0\.0\.1:\d+)/);
  return { ...running, url: m[1] as string };
}

/** Runs one `vigil admin` command against `env`'s stores and returns its JSON answer (throws on failure). */
export async function runAdmin(
  t: Test,
  env: Record<string, string>,
  ...args: string[]
): Promise<Record<string, string>> {
  const run = spawnVigil(t, ["admin", ...args], env);
  const { code } = await run.exited(60_000);
  if (code !== 0) throw new Error(`vigil admin ${args.join(" ")} exited ${code}: ${run.output()}`);
  return JSON.parse(run.output().trim().split("\n").pop() as string) as Record<string, string>;
}

/**
 * Two real `vigil serve --roles api` processes on one database (as behind a load balancer), and
 * the `vigil admin` commands of that database, for the tests about state that must hold across
 * processes (test/process/shared-state, test/budgets/watch).
 */
export async function twoApis(t: Test, env: Record<string, string>) {
  const admin = (...args: string[]) => runAdmin(t, env, ...args);
  // the first applies the migrations alone; the second starts once they are in
  const served = { ...env, LOG_LEVEL: "info" }; // the start-up lines waited for are at info
  const a = await serveOnFreePort(t, served, ["--roles", "api"]);
  await a.waitFor(/series store ready/, 60_000);
  const b = await serveOnFreePort(t, served, ["--roles", "api"]);
  await b.waitFor(/series store ready/, 60_000);
  t.teardown(async () => {
    for (const p of [a, b]) if (p.proc.exitCode === null) p.proc.kill("SIGTERM");
    await Promise.all([a.exited().catch(() => {}), b.exited().catch(() => {})]);
  });
  return { a, b, admin };
}
