-- claim
-- args: token, group, limit
UPDATE "jobs" SET "locked_until" = ?, "attempt" = "attempt" + 1 WHERE "id" IN (SELECT "id" FROM "jobs" WHERE "grp" = ? AND "locked_until" IS NULL ORDER BY "id" LIMIT ?) RETURNING "id", "payload", "attempt", NULL, NULL;

-- rescue
-- args: token, group, now, limit
UPDATE "jobs" SET "locked_until" = ?, "attempt" = "attempt" + 1 WHERE "id" IN (SELECT "id" FROM "jobs" WHERE "grp" = ? AND "locked_until" IS NOT NULL AND "locked_until" <= ? ORDER BY "id" LIMIT ?) RETURNING "id", "payload", "attempt", NULL, NULL;

-- lapsedProbe
-- args: group, now
SELECT "id" FROM "jobs" WHERE "grp" = ? AND "locked_until" IS NOT NULL AND "locked_until" <= ? ORDER BY "id" LIMIT 1;

-- done
DELETE FROM "jobs" WHERE "id" = ? AND "locked_until" = ?;

-- retry
UPDATE "jobs" SET "locked_until" = NULL WHERE "id" = ? AND "locked_until" = ?;

-- dlGroup
UPDATE "jobs" SET "grp" = ?, "locked_until" = NULL WHERE "id" = ? AND "locked_until" = ?;

-- hold
UPDATE "jobs" SET "locked_until" = ? WHERE "id" = ? AND "locked_until" = ?;

-- doneMany
DELETE FROM "jobs" WHERE "locked_until" = ? AND "id" IN (?, ?, ?);

-- release
UPDATE "jobs" SET "locked_until" = NULL WHERE "id" = ? AND "locked_until" = ?;

-- unclaim
UPDATE "jobs" SET "locked_until" = NULL, "attempt" = "attempt" - 1 WHERE "id" = ? AND "locked_until" = ?;

-- uncharge
UPDATE "jobs" SET "attempt" = "attempt" - 1 WHERE "id" = ? AND "locked_until" = ?;

-- charge
UPDATE "jobs" SET "attempt" = "attempt" + 1 WHERE "id" = ? AND "locked_until" = ?;

-- extend
UPDATE "jobs" SET "locked_until" = ? WHERE "id" = ? AND "locked_until" = ?;

