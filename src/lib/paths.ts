import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

/** The package root (the folder holding package.json), whether running from src/ or dist/. */
function findRoot(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  while (!fs.existsSync(path.join(dir, "package.json"))) {
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error(`package.json not found above ${fileURLToPath(import.meta.url)}`);
    dir = parent;
  }
  return dir;
}

export const packageRoot = findRoot();
export const sqlDir = path.join(packageRoot, "sql");
