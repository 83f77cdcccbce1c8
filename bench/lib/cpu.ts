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
