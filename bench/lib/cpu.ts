import { execFileSync } from "node:child_process";
import fs from "node:fs";

/** CPU seconds (user + system) a process has used so far, from /proc; NaN where unreadable. */
export function processCpuSeconds(pid: number | undefined): number {
  if (pid === undefined) return Number.NaN;
  try {
    // Fields after the command name (which may hold spaces): utime and stime are 14 and 15.
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(fields[11]) + Number(fields[12])) / 100; // USER_HZ is 100 on Linux
  } catch {
    return Number.NaN;
  }
}

/** The pid listening on a local TCP port (via `ss`), so a benchmark can account a server's CPU. */
export function listenerPid(url: string): number | undefined {
  const u = new URL(url);
  if (u.hostname !== "127.0.0.1" && u.hostname !== "localhost") return undefined;
  try {
    const out = execFileSync("ss", ["-ltnpH", `sport = :${u.port || 80}`], { encoding: "utf8" });
    const m = /pid=(\d+)/.exec(out);
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}

/** This process's CPU seconds so far (all threads). */
export function ownCpuSeconds(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
}

/** utime + stime, and the reaped children's cutime + cstime, of a /proc stat line, in seconds. */
function statTimes(pid: string): { own: number; children: number; comm: string } | undefined {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    const comm = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return {
      own: (Number(f[11]) + Number(f[12])) / 100,
      children: (Number(f[13]) + Number(f[14])) / 100,
      comm,
    };
  } catch {
    return undefined; // exited meanwhile
  }
}

/**
 * CPU seconds used so far by every PostgreSQL process on this host: each live process (the
 * postmaster, its backends, the checkpointer, WAL writer, autovacuum, ...) plus what the exited
 * ones used, which the kernel adds to the postmaster's children's times when it reaps them. A
 * benchmark reads it before and after; the difference is PostgreSQL's whole share, backends that
 * came and went included. NaN when no PostgreSQL runs on this host (a remote DATABASE_URL).
 */
export function postgresCpuSeconds(): number {
  let sum = 0;
  let found = false;
  for (const pid of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(pid)) continue;
    const t = statTimes(pid);
    if (!t || t.comm !== "postgres") continue;
    found = true;
    sum += t.own;
    // only the postmaster's children are PostgreSQL's own; a backend forks none
    sum += t.children;
  }
  return found ? sum : Number.NaN;
}

/** One process's CPU seconds plus its reaped children's (a JVM's threads are in its own). */
export function processTreeCpuSeconds(pid: number | undefined): number {
  if (pid === undefined) return Number.NaN;
  const t = statTimes(String(pid));
  return t ? t.own + t.children : Number.NaN;
}

/** CPU seconds of each part of the system, read together. */
export interface SystemCpu {
  vigil: number;
  postgres: number;
  questdb: number;
}

/**
 * Reads Vigil's processes, PostgreSQL and QuestDB together, so a benchmark can print each share of
 * the CPU per check and their sum. `vigil` is a function of the pids (a benchmark restarts them).
 */
export function systemCpu(
  vigilPids: () => (number | undefined)[],
  questdbPid: number | undefined,
): SystemCpu {
  return {
    vigil: vigilPids().reduce((a: number, p) => a + processCpuSeconds(p), 0),
    postgres: postgresCpuSeconds(),
    questdb: questdbPid === undefined ? 0 : processTreeCpuSeconds(questdbPid),
  };
}

export function cpuDelta(a: SystemCpu, b: SystemCpu): SystemCpu {
  return { vigil: b.vigil - a.vigil, postgres: b.postgres - a.postgres, questdb: b.questdb - a.questdb };
}
