/**
 * Text that line protocol and SQL must carry unchanged: every character ILP escapes (space,
 * comma, equals sign, double quote, backslash, line breaks), non-ASCII, JSON, and the empty
 * string. Used by the ILP encoder test and the series contract's round trip.
 */
export const AWKWARD_TEXT = [
  "plain",
  "8b1f5f9e-0c3a-4d6f-9a57-2f0e6c1d1a11",
  "with space",
  "a,b=c",
  'quote " inside',
  "back\\slash\\",
  "new\nline\rreturn",
  "unicode ✓ ünï 日本",
  '{"gatewayPidAlive":true,"load":[0.5, 1]}',
  "trailing\\ ",
  "",
] as const;
