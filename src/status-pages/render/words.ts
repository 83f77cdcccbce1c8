import type { ComponentState, PostStatus } from "../public-model.js";

/** What the page, the badges and the feed say for each state (`unknown`: never checked). */
export const STATE_WORDS: Record<ComponentState, string> = {
  operational: "Operational",
  degraded_performance: "Degraded performance",
  partial_outage: "Partial outage",
  major_outage: "Major outage",
  under_maintenance: "Under maintenance",
  unknown: "No data",
};

export const POST_STATUS_WORDS: Record<PostStatus, string> = {
  investigating: "Investigating",
  identified: "Identified",
  monitoring: "Monitoring",
  resolved: "Resolved",
};

/** 1234567 → "1,234,567". */
export const int = (n: number): string => String(Math.round(n)).replace(/\B(?=(\d{3})+(?!\d))/g, ",");

/**
 * An uptime percent with at most 2 decimals, rounded down as the dashboard does, so that a day
 * with one failed check in 100,000 reads 99.99% and never 100%: 99.95 → "99.95%", 100 → "100%".
 * (Rounded to 3 decimals first: 99.95 * 100 is 9994.999… in binary.)
 */
export const percentText = (p: number): string => `${Math.floor(Math.round(p * 1000) / 10) / 100}%`;

/** `available` of `checks` as the dashboard's tooltips give it ("99.86"), in integers so 999/1000 is 99.9. */
export const ratioText = (available: number, checks: number): string =>
  String(Math.floor((available * 10_000) / checks) / 100);

const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

/**
 * A time for people, in UTC: "Nov 27, 14:05 UTC", with the year ("Dec 30, 2025, 23:10 UTC") when
 * it is not the year of `now` (past incidents reach 90 days back, over a new year).
 */
export function utcTime(iso: string, now: string): string {
  const d = new Date(iso);
  const year = d.getUTCFullYear() === new Date(now).getUTCFullYear() ? "" : `, ${d.getUTCFullYear()}`;
  const hh = String(d.getUTCHours()).padStart(2, "0");
  const mm = String(d.getUTCMinutes()).padStart(2, "0");
  return `${MONTHS[d.getUTCMonth()]} ${d.getUTCDate()}${year}, ${hh}:${mm} UTC`;
}

/** A UTC day for people: "Nov 27, 2026". */
export function utcDay(iso: string): string {
  const d = new Date(iso);
  return `${MONTHS[d.getUTCMonth()]} ${d.getUTCDate()}, ${d.getUTCFullYear()}`;
}

/** A duration for people, two units at most: "< 1 min", "42 min", "2 h 5 min", "3 d 4 h". */
export function durationText(ms: number): string {
  const minutes = Math.floor(Math.max(0, ms) / 60_000);
  if (minutes < 1) return "< 1 min";
  if (minutes < 60) return `${minutes} min`;
  const hours = Math.floor(minutes / 60);
  if (hours < 24) return minutes % 60 ? `${hours} h ${minutes % 60} min` : `${hours} h`;
  const days = Math.floor(hours / 24);
  return hours % 24 ? `${days} d ${hours % 24} h` : `${days} d`;
}
