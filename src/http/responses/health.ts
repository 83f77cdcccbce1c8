import { z } from "zod";

const storeStatus = z.object({ backend: z.string(), ok: z.boolean(), error: z.string().optional() });
const stores = z.object({ relational: storeStatus, series: storeStatus });

export const alive = z.object({ status: z.literal("ok") });
export const ready = z.object({ status: z.literal("ready"), stores });
export const notReady = z.object({ status: z.literal("not_ready"), error: z.string(), stores });
