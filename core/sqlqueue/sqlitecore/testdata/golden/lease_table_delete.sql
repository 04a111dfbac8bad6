-- claim
-- args: token, now, limit
UPDATE "jobs" SET "locked_until" = ?, "attempt" = "attempt" + 1 WHERE "id" IN (SELECT "id" FROM "jobs" WHERE ("retry_after" IS NULL OR "retry_after" <= ?) AND "locked_until" IS NULL ORDER BY "id" LIMIT ?) RETURNING "id", "payload", "attempt", "headers", "created_at";

-- rescue
-- args: token, now, now, limit
UPDATE "jobs" SET "locked_until" = ?, "attempt" = "attempt" + 1 WHERE "id" IN (SELECT "id" FROM "jobs" WHERE ("retry_after" IS NULL OR "retry_after" <= ?) AND "locked_until" IS NOT NULL AND "locked_until" <= ? ORDER BY "id" LIMIT ?) RETURNING "id", "payload", "attempt", "headers", "created_at";

-- lapsedProbe
-- args: now, now
SELECT "id" FROM "jobs" WHERE ("retry_after" IS NULL OR "retry_after" <= ?) AND "locked_until" IS NOT NULL AND "locked_until" <= ? ORDER BY "id" LIMIT 1;

-- done
DELETE FROM "jobs" WHERE "id" = ? AND "locked_until" = ?;

-- retry
UPDATE "jobs" SET "locked_until" = NULL, "last_error" = ? WHERE "id" = ? AND "locked_until" = ?;

-- retryAfter
UPDATE "jobs" SET "retry_after" = ?, "locked_until" = NULL, "last_error" = ? WHERE "id" = ? AND "locked_until" = ?;

-- dlNote
UPDATE "jobs" SET "headers" = ?, "last_error" = ? WHERE "id" = ? AND "locked_until" = ?;

-- dlCopy
INSERT INTO "jobs_dead" ("id", "payload", "attempt", "retry_after", "locked_until", "headers", "created_at", "last_error") SELECT "id", "payload", "attempt", NULL, NULL, "headers", "created_at", "last_error" FROM "jobs" WHERE "id" = ? AND "locked_until" = ?;

-- dlDelete
DELETE FROM "jobs" WHERE "id" = ? AND "locked_until" = ?;

-- hold
UPDATE "jobs" SET "retry_after" = ?, "locked_until" = NULL, "last_error" = ? WHERE "id" = ? AND "locked_until" = ?;

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

