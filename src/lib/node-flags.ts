/**
 * The V8 flags Vigil's server runs with: `npm start`, the Dockerfile, the `vigil` command's own
 * first line, and the benchmarks that start `vigil serve` or host Vigil in their process (`npm run
 * bench`). test/docs.test.ts keeps those places equal to this list. Workers of `serve --workers`
 * inherit them from the primary. Running `node dist/src/cli.js serve` by hand, pass them too (or
 * set `NODE_OPTIONS`); V8 reads them only when the process starts.
 *
 * `--max-semi-space-size=32`: a young generation of 2 × 32 MB instead of V8's 2 × 16 MB. Heartbeat
 * ingest keeps about a hundred requests' objects alive at any moment (waiting for their group
 * commit), and every scavenge copies them: at ~13,000 heartbeats/s the default size scavenged every
 * ~30 ms, and scavenges took 6.9 µs of each heartbeat's CPU; at 32 MB, 4.6 µs (64 MB: 4.2 µs, for
 * twice the memory). The cost is up to ~50 MB more resident memory under load.
 */
export const SERVER_NODE_FLAGS: readonly string[] = ["--max-semi-space-size=32"];
