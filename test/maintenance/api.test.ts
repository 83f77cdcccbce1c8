import t from "tap";
import { underMaintenance } from "../../src/maintenance/repository.js";
import { testApp } from "../helpers/app.js";
import { requireBackend } from "../helpers/backends.js";
import { call, seedTenants } from "../helpers/tenants.js";

/**
 * POST/GET/DELETE /v1/maintenance-windows (issue #31, point 4; docs/maintenance.md): one-off and
 * recurring windows, every bad input a 400 naming its field with nothing stored, connections the
 * key may not see 403/404, and each account seeing and removing only its own windows.
 */

const ABSENT = "00000000-0000-4000-8000-000000000000";
const HOUR = 3_600_000;

interface Window {
  id: string;
  organization_id: string | null;
  covers: string;
  connection_ids: string[] | null;
  starts_at: string;
  ends_at: string | null;
  rrule: string | null;
  duration_minutes: number | null;
  timezone: string | null;
  active: boolean;
  next: { starts_at: string; ends_at: string } | null;
  created_at: string;
}

for (const backend of ["pglite", "postgres"] as const) {
  t.test(`maintenance windows over the API (${backend})`, async (t) => {
    if (!(await requireBackend(t, backend))) return;
    const ta = await testApp(t, { relational: backend });
    const { app, ctx } = ta;
    const db = ctx.stores.db;
    const w = await seedTenants(ta);
    const { alicePersonal: alice, carolPersonal: carol, bobPersonal: bob, davePersonal: dave } = w.keys;
    const stored = async () =>
      Number((await db.query<{ n: string }>("SELECT count(*) AS n FROM maintenance_windows")).rows[0]?.n);
    const now = Date.now();
    const iso = (ms: number) => new Date(ms).toISOString();

    await t.test("a one-off window that started an hour ago and ends in an hour", async (t) => {
      const res = await call(app, alice, "POST", "/v1/maintenance-windows", {
        connection_ids: [w.conns.PA],
        starts_at: iso(now - HOUR),
        ends_at: iso(now + HOUR),
      });
      t.equal(res.statusCode, 201, res.body);
      const made = res.json() as Window;
      t.match(made, {
        id: /^[0-9a-f-]{36}$/,
        organization_id: null,
        covers: "connections",
        connection_ids: [w.conns.PA],
        starts_at: iso(now - HOUR),
        ends_at: iso(now + HOUR),
        rrule: null,
        duration_minutes: null,
        timezone: null,
        active: true,
        next: { starts_at: iso(now - HOUR), ends_at: iso(now + HOUR) },
      });
      t.equal(await underMaintenance(db, w.conns.PA, new Date()), true, "PA is under maintenance now");
      t.equal(await underMaintenance(db, w.conns.PA, new Date(now + 2 * HOUR)), false, "not after its end");
      t.equal(await underMaintenance(db, w.conns.PB, new Date()), false, "another connection is not");

      const got = await call(app, alice, "GET", `/v1/maintenance-windows/${made.id}`);
      t.equal(got.statusCode, 200);
      t.same(got.json(), made, "GET by id answers the same window");
      const list = await call(app, w.keys.aliceReadOnly, "GET", "/v1/maintenance-windows");
      t.equal(list.statusCode, 200, "a connections:read key lists them");
      t.same(
        (list.json() as { maintenance_windows: Window[] }).maintenance_windows.map((x) => x.id),
        [made.id],
      );
      t.equal(
        (await call(app, w.keys.aliceReadOnly, "DELETE", `/v1/maintenance-windows/${made.id}`)).statusCode,
        403,
        "deleting needs connections:write",
      );

      // another tenant neither sees nor deletes it: 404, as for an absent one
      for (const key of [carol, bob, w.keys.aliceOrgA]) {
        t.equal((await call(app, key, "GET", `/v1/maintenance-windows/${made.id}`)).statusCode, 404);
        t.equal((await call(app, key, "DELETE", `/v1/maintenance-windows/${made.id}`)).statusCode, 404);
        t.same(
          (await call(app, key, "GET", "/v1/maintenance-windows")).json(),
          { maintenance_windows: [] },
          "not listed to another account",
        );
      }
      const absent = await call(app, alice, "GET", `/v1/maintenance-windows/${ABSENT}`);
      t.equal(absent.statusCode, 404);
      t.match(absent.json(), { success: false, error: { code: "NOT_FOUND" } });
      t.equal(await underMaintenance(db, w.conns.PA, new Date()), true, "still in force");

      const del = await call(app, alice, "DELETE", `/v1/maintenance-windows/${made.id}`);
      t.equal(del.statusCode, 200);
      t.same(del.json(), { id: made.id, deleted: true });
      t.equal(await underMaintenance(db, w.conns.PA, new Date()), false, "over once deleted");
      t.equal((await call(app, alice, "GET", `/v1/maintenance-windows/${made.id}`)).statusCode, 404);
    });

    await t.test("bad input: a 400 naming the field, nothing stored", async (t) => {
      const before = await stored();
      const recurring = { connection_ids: [w.conns.PA], duration_minutes: 60, timezone: "Europe/Paris" };
      const oneOff = { connection_ids: [w.conns.PA], starts_at: iso(now), ends_at: iso(now + HOUR) };
      const cases: [string, unknown, string][] = [
        ["not an object", [1], "body"],
        ["an unknown field", { ...oneOff, reason: "upgrade" }, "body.reason"],
        ["an invalid RRULE", { ...recurring, rrule: "FREQ=SOMETIMES" }, "body.rrule"],
        [
          "an RRULE part that does not exist",
          { ...recurring, rrule: "FREQ=DAILY;BYFULLMOON=1" },
          "body.rrule",
        ],
        ["an RRULE without FREQ", { ...recurring, rrule: "BYDAY=MO" }, "body.rrule"],
        [
          "an RRULE with a DTSTART line",
          { ...recurring, rrule: "DTSTART:20260101T000000Z\nRRULE:FREQ=DAILY" },
          "body.rrule",
        ],
        [
          "an RRULE whose UNTIL is past",
          { ...recurring, rrule: "FREQ=DAILY;UNTIL=20200101T000000Z" },
          "body.rrule",
        ],
        [
          "an RRULE that never occurs",
          { ...recurring, rrule: "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=31" },
          "body.rrule",
        ],
        [
          "a daily RRULE that never occurs",
          { ...recurring, rrule: "FREQ=DAILY;BYMONTH=2;BYMONTHDAY=30" },
          "body.rrule",
        ],
        ["a minutely RRULE", { ...recurring, rrule: "FREQ=MINUTELY" }, "body.rrule"],
        [
          "an unknown time zone",
          { ...recurring, rrule: "FREQ=DAILY", timezone: "Mars/Olympus_Mons" },
          "body.timezone",
        ],
        [
          "an offset for a time zone",
          { ...recurring, rrule: "FREQ=DAILY", timezone: "+02:00" },
          "body.timezone",
        ],
        [
          "a recurring window without a time zone",
          { ...recurring, rrule: "FREQ=DAILY", timezone: undefined },
          "body.timezone",
        ],
        [
          "duration_minutes 0",
          { ...recurring, rrule: "FREQ=DAILY", duration_minutes: 0 },
          "body.duration_minutes",
        ],
        [
          "duration_minutes over a week",
          { ...recurring, rrule: "FREQ=DAILY", duration_minutes: 10_081 },
          "body.duration_minutes",
        ],
        [
          "duration_minutes not whole",
          { ...recurring, rrule: "FREQ=DAILY", duration_minutes: 1.5 },
          "body.duration_minutes",
        ],
        [
          "a recurring window with ends_at",
          { ...recurring, rrule: "FREQ=DAILY", ends_at: iso(now + HOUR) },
          "body.ends_at",
        ],
        ["ends_at equal to starts_at", { ...oneOff, ends_at: iso(now) }, "body.ends_at"],
        ["ends_at before starts_at", { ...oneOff, ends_at: iso(now - HOUR) }, "body.ends_at"],
        [
          "ends_at in the past",
          { ...oneOff, starts_at: iso(now - 2 * HOUR), ends_at: iso(now - HOUR) },
          "body.ends_at",
        ],
        ["no ends_at", { ...oneOff, ends_at: undefined }, "body.ends_at"],
        ["no starts_at", { ...oneOff, starts_at: undefined }, "body.starts_at"],
        ["a starts_at that is no time", { ...oneOff, starts_at: "tomorrow" }, "body.starts_at"],
        [
          "a recurring window that started over a year ago",
          { ...recurring, rrule: "FREQ=DAILY", starts_at: iso(now - 400 * 86_400_000) },
          "body.starts_at",
        ],
        ["a one-off window with a time zone", { ...oneOff, timezone: "UTC" }, "body.timezone"],
        [
          "both connection_ids and organization_id",
          { ...oneOff, organization_id: w.orgs.orgA.id },
          "body.organization_id",
        ],
        [
          "neither connection_ids nor organization_id",
          { ...oneOff, connection_ids: undefined },
          "body.connection_ids",
        ],
        ["an empty connection_ids", { ...oneOff, connection_ids: [] }, "body.connection_ids"],
        [
          "a connection id that is no UUID",
          { ...oneOff, connection_ids: [w.conns.PA, "pa"] },
          "body.connection_ids.1",
        ],
        [
          "connections of two accounts",
          { ...oneOff, connection_ids: [w.conns.PA, w.conns.OA] },
          "body.connection_ids",
        ],
      ];
      for (const [what, body, field] of cases) {
        const res = await call(app, alice, "POST", "/v1/maintenance-windows", body);
        t.equal(res.statusCode, 400, `${what}: 400`, { body: res.body });
        const err = res.json() as {
          success: boolean;
          error: { code: string; message: string; details: unknown };
        };
        t.match(
          err,
          { success: false, error: { code: "VALIDATION_ERROR", details: { field } } },
          `${what}: names ${field}`,
        );
        t.ok(err.error.message.startsWith(`${field}:`), `${what}: the message starts with the field`);
      }
      const started = Date.now();
      await call(app, alice, "POST", "/v1/maintenance-windows", {
        ...recurring,
        rrule: "FREQ=HOURLY;BYMONTH=2;BYMONTHDAY=31",
      });
      t.ok(Date.now() - started < 3_000, "a rule that never occurs is refused quickly, whatever its FREQ");

      // connections the key may not see: 403; absent: 404 (as every endpoint naming a connection)
      const foreign = await call(app, alice, "POST", "/v1/maintenance-windows", {
        ...oneOff,
        connection_ids: [w.conns.PC],
      });
      t.equal(foreign.statusCode, 403, "another tenant's connection");
      t.match(foreign.json(), { success: false, error: { code: "FORBIDDEN" } });
      const absent = await call(app, alice, "POST", "/v1/maintenance-windows", {
        ...oneOff,
        connection_ids: [w.conns.PA, ABSENT],
      });
      t.equal(absent.statusCode, 404, "an absent connection");
      t.equal(
        (await call(app, w.keys.aliceOrgA, "POST", "/v1/maintenance-windows", oneOff)).statusCode,
        403,
        "an organization key and a personal connection",
      );
      t.equal(await stored(), before, "nothing was stored");
    });

    await t.test(
      "an organization's windows: its admins and owners change them, every member sees them",
      async (t) => {
        const body = { organization_id: w.orgs.orgA.id, starts_at: iso(now), ends_at: iso(now + HOUR) };
        const byMember = await call(app, dave, "POST", "/v1/maintenance-windows", body);
        t.equal(byMember.statusCode, 403, "a plain member may not add one", { body: byMember.body });
        t.equal(
          (
            await call(app, dave, "POST", "/v1/maintenance-windows", {
              ...body,
              organization_id: undefined,
              connection_ids: [w.conns.OA],
            })
          ).statusCode,
          403,
          "nor over one of its connections",
        );
        t.equal(
          (await call(app, bob, "POST", "/v1/maintenance-windows", body)).statusCode,
          403,
          "nor someone outside it",
        );
        const made = await call(app, alice, "POST", "/v1/maintenance-windows", body);
        t.equal(made.statusCode, 201, made.body);
        const win = made.json() as Window;
        t.match(win, {
          organization_id: w.orgs.orgA.id,
          covers: "organization",
          connection_ids: null,
          active: true,
        });
        t.equal(
          await underMaintenance(db, w.conns.OA, new Date()),
          true,
          "it covers the organization's connections",
        );
        t.equal(await underMaintenance(db, w.conns.PA, new Date()), false, "not its owner's personal ones");
        t.equal(await underMaintenance(db, w.conns.OB, new Date()), false, "nor another organization's");

        for (const key of [dave, w.keys.aliceOrgA]) {
          const list = (await call(app, key, "GET", "/v1/maintenance-windows")).json() as {
            maintenance_windows: Window[];
          };
          t.same(
            list.maintenance_windows.map((x) => x.id),
            [win.id],
            "members and the organization's key see it",
          );
        }
        t.equal(
          (await call(app, bob, "GET", `/v1/maintenance-windows/${win.id}`)).statusCode,
          404,
          "outsiders do not",
        );
        t.equal(
          (await call(app, w.keys.bobOrgB, "GET", `/v1/maintenance-windows/${win.id}`)).statusCode,
          404,
        );
        t.equal(
          (await call(app, dave, "DELETE", `/v1/maintenance-windows/${win.id}`)).statusCode,
          403,
          "a member may not delete it",
        );
        t.equal(
          (await call(app, bob, "DELETE", `/v1/maintenance-windows/${win.id}`)).statusCode,
          404,
          "an outsider is told nothing",
        );
        t.equal(
          (await call(app, w.keys.aliceOrgA, "DELETE", `/v1/maintenance-windows/${win.id}`)).statusCode,
          200,
          "its owner may",
        );
        t.equal(await underMaintenance(db, w.conns.OA, new Date()), false);
      },
    );

    await t.test("a weekly window in America/New_York follows DST", async (t) => {
      // Sundays 02:00 to 04:00 New York time, from 2026-03-01 (EST, UTC-5); DST starts on
      // 2026-03-08 (02:00 does not exist that day: it is read as 03:00 EDT) and ends on 2026-11-01
      const res = await call(app, alice, "POST", "/v1/maintenance-windows", {
        connection_ids: [w.conns.PA],
        rrule: "RRULE:FREQ=WEEKLY;BYDAY=SU;BYHOUR=2;BYMINUTE=0;BYSECOND=0",
        duration_minutes: 120,
        timezone: "America/New_York",
        starts_at: "2026-03-01T00:00:00-05:00",
      });
      t.equal(res.statusCode, 201, res.body);
      const win = res.json() as Window;
      t.match(win, {
        rrule: "FREQ=WEEKLY;BYDAY=SU;BYHOUR=2;BYMINUTE=0;BYSECOND=0",
        duration_minutes: 120,
        timezone: "America/New_York",
        starts_at: "2026-03-01T07:00:00.000Z",
        ends_at: null,
        covers: "connections",
      });
      const at = (s: string) => underMaintenance(db, w.conns.PA, new Date(s));
      t.equal(await at("2026-03-01T06:59:59Z"), false, "EST: not before 02:00 (07:00 UTC)");
      t.equal(await at("2026-03-01T07:00:00Z"), true, "EST: from 02:00");
      t.equal(await at("2026-03-01T08:59:59Z"), true, "EST: until 04:00");
      t.equal(await at("2026-03-01T09:00:00Z"), false, "EST: over at 04:00 (09:00 UTC)");
      t.equal(
        await at("2026-03-08T06:30:00Z"),
        false,
        "DST day: 02:00 does not exist, 01:30 EST is not covered",
      );
      t.equal(await at("2026-03-08T07:00:00Z"), true, "DST day: from 03:00 EDT (07:00 UTC)");
      t.equal(await at("2026-03-08T08:59:00Z"), true, "DST day: two hours long");
      t.equal(await at("2026-03-08T09:00:00Z"), false);
      t.equal(await at("2026-03-15T06:00:00Z"), true, "EDT: 02:00 is 06:00 UTC");
      t.equal(await at("2026-03-15T08:00:00Z"), false, "EDT: over at 04:00 (08:00 UTC)");
      t.equal(await at("2026-03-18T06:30:00Z"), false, "not on a Wednesday");
      // the day DST ends, 01:00 to 02:00 happens twice; 02:00 then is EST, 07:00 UTC
      t.equal(await at("2026-11-01T06:30:00Z"), false, "DST end day: the second 01:30 is not covered");
      t.equal(await at("2026-11-01T07:00:00Z"), true, "DST end day: from 02:00 EST (07:00 UTC)");
      t.equal(await at("2026-11-01T09:00:00Z"), false, "DST end day: over at 04:00 EST");
      t.equal(await at("2026-11-08T07:30:00Z"), true, "EST again: 02:00 is 07:00 UTC");
      t.equal(await at("2026-11-08T06:30:00Z"), false);
      t.ok(win.next, "it has a next occurrence");
      const next = win.next as { starts_at: string; ends_at: string };
      t.equal(
        Date.parse(next.ends_at) - Date.parse(next.starts_at),
        2 * HOUR,
        "each occurrence lasts 120 minutes",
      );
      t.equal(new Date(next.starts_at).getUTCDay(), 0, "on a Sunday");
      await call(app, alice, "DELETE", `/v1/maintenance-windows/${win.id}`);
    });

    await t.test("a connection moved to another account leaves the window", async (t) => {
      const conn = (
        (
          await call(app, bob, "POST", "/v1/connections", {
            service_type: "gateway",
            service_name: "bob moves it",
          })
        ).json() as { connection: { id: string } }
      ).connection.id;
      const made = await call(app, bob, "POST", "/v1/maintenance-windows", {
        connection_ids: [conn],
        starts_at: iso(now),
        ends_at: iso(now + HOUR),
      });
      t.equal(made.statusCode, 201, made.body);
      const id = (made.json() as Window).id;
      t.equal(await underMaintenance(db, conn, new Date(now + 60_000)), true);
      const moved = await call(app, bob, "PUT", `/v1/connections/${conn}`, {
        organization_id: w.orgs.orgB.id,
      });
      t.equal(moved.statusCode, 200, moved.body);
      t.equal(
        await underMaintenance(db, conn, new Date(now + 60_000)),
        false,
        "bob's personal window no longer covers a connection of organization B",
      );
      t.match((await call(app, bob, "GET", `/v1/maintenance-windows/${id}`)).json(), { connection_ids: [] });
      await call(app, bob, "DELETE", `/v1/maintenance-windows/${id}`);
    });

    await t.test("a recurring window that counts down: COUNT bounds it", async (t) => {
      const res = await call(app, alice, "POST", "/v1/maintenance-windows", {
        connection_ids: [w.conns.PA],
        rrule: "FREQ=DAILY;COUNT=3",
        duration_minutes: 30,
        timezone: "UTC",
        starts_at: iso(now - 60_000),
      });
      t.equal(res.statusCode, 201, res.body);
      const win = res.json() as Window;
      const first = Math.floor((now - 60_000) / 1000) * 1000;
      t.match(win, {
        starts_at: iso(first),
        ends_at: iso(first + 2 * 86_400_000 + 30 * 60_000),
        active: true,
      });
      t.equal(
        await underMaintenance(db, w.conns.PA, new Date(first + 86_400_000 + 60_000)),
        true,
        "the second day",
      );
      t.equal(
        await underMaintenance(db, w.conns.PA, new Date(first + 3 * 86_400_000 + 60_000)),
        false,
        "no fourth day",
      );
      await call(app, alice, "DELETE", `/v1/maintenance-windows/${win.id}`);
    });
  });
}
