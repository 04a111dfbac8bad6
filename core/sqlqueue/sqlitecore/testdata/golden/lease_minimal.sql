-- claim
-- args: token, limit
UPDATE "jobs" SET "locked_until" = ? WHERE "id" IN (SELECT "id" FROM "jobs" WHERE "locked_until" IS NULL ORDER BY "id" LIMIT ?) RETURNING "id", "payload", 1, NULL, NULL;

-- rescue
-- args: token, now, limit
UPDATE "jobs" SET "locked_until" = ? WHERE "id" IN (SELECT "id" FROM "jobs" WHERE "locked_until" IS NOT NULL AND "locked_until" <= ? ORDER BY "id" LIMIT ?) RETURNING "id", "payload", 1, NULL, NULL;

-- lapsedProbe
-- args: now
SELECT "id" FROM "jobs" WHERE "locked_until" IS NOT NULL AND "locked_until" <= ? ORDER BY "id" LIMIT 1;

-- done
DELETE FROM "jobs" WHERE "id" = ? AND "locked_until" = ?;

-- retry
UPDATE "jobs" SET "locked_until" = NULL WHERE "id" = ? AND "locked_until" = ?;

-- hold
UPDATE "jobs" SET "locked_until" = ? WHERE "id" = ? AND "locked_until" = ?;

-- doneMany
DELETE FROM "jobs" WHERE "locked_until" = ? AND "id" IN (?, ?, ?);

-- release
UPDATE "jobs" SET "locked_until" = NULL WHERE "id" = ? AND "locked_until" = ?;

-- extend
UPDATE "jobs" SET "locked_until" = ? WHERE "id" = ? AND "locked_until" = ?;

