import fs from "node:fs";
import path from "node:path";

/**
 * An exclusive lock on a data folder, held for the life of the process.
 *
 * PGlite allows one process per folder, and two openers both report success while one of
 * them silently loses its writes. The lock file holds the owner's pid; a second opener
 * fails with a message saying what to do, and a lock left by a dead process is taken over.
 */
export class DataDirLockedError extends Error {
  constructor(
    readonly dir: string,
    readonly pid: number,
  ) {
    super(
      `The data folder ${dir} is in use by another Vigil process (pid ${pid}). ` +
        "Embedded mode allows one process per folder: stop that process, or run admin commands " +
        "while it is running (they are served by the running server), or use DATABASE_URL.",
    );
    this.name = "DataDirLockedError";
  }
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

export interface DirLock {
  readonly file: string;
  release(): void;
}

export function lockDataDir(dir: string): DirLock {
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, "vigil.lock");
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const fd = fs.openSync(file, "wx");
      fs.writeSync(fd, `${process.pid}\n`);
      fs.closeSync(fd);
      let released = false;
      const release = () => {
        if (released) return;
        released = true;
        try {
          if (Number(fs.readFileSync(file, "utf8").trim()) === process.pid) fs.unlinkSync(file);
        } catch {
          // already gone
        }
      };
      process.once("exit", release);
      return { file, release };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      const owner = Number(fs.readFileSync(file, "utf8").trim());
      if (Number.isInteger(owner) && owner > 0 && pidAlive(owner)) {
        throw new DataDirLockedError(dir, owner);
      }
      // Stale lock from a process that died: remove it and try again. If two processes race
      // here, only one of them wins the exclusive create above.
      fs.rmSync(file, { force: true });
    }
  }
  throw new Error(`Could not take the lock ${file}; remove it if no Vigil process is running.`);
}

/** The pid holding the folder's lock, or undefined when nobody alive holds it. */
export function dataDirOwner(dir: string): number | undefined {
  try {
    const owner = Number(fs.readFileSync(path.join(dir, "vigil.lock"), "utf8").trim());
    return Number.isInteger(owner) && owner > 0 && pidAlive(owner) ? owner : undefined;
  } catch {
    return undefined;
  }
}
