-- claim
-- args: token, now, limit
UPDATE "jobs" SET "locked_until" = $1, "attempt" = "attempt" + 1 WHERE "id" IN (SELECT "id" FROM "jobs" WHERE ("retry_after" IS NULL OR "retry_after" <= $2) AND "locked_until" IS NULL ORDER BY "id" LIMIT $3 FOR UPDATE SKIP LOCKED) RETURNING "id", "payload", "attempt", "headers", "created_at";

-- rescue
-- args: token, now, now, limit
UPDATE "jobs" SET "locked_until" = $1, "attempt" = "attempt" + 1 WHERE "id" IN (SELECT "id" FROM "jobs" WHERE ("retry_after" IS NULL OR "retry_after" <= $2) AND "locked_until" IS NOT NULL AND "locked_until" <= $3 ORDER BY "id" LIMIT $4 FOR UPDATE SKIP LOCKED) RETURNING "id", "payload", "attempt", "headers", "created_at";

-- lapsedProbe
-- args: now, now
SELECT "id" FROM "jobs" WHERE ("retry_after" IS NULL OR "retry_after" <= $1) AND "locked_until" IS NOT NULL AND "locked_until" <= $2 ORDER BY "id" LIMIT 1 FOR UPDATE SKIP LOCKED;

-- done
DELETE FROM "jobs" WHERE "id" = $1 AND "locked_until" = $2;

-- retry
UPDATE "jobs" SET "locked_until" = NULL, "last_error" = $1 WHERE "id" = $2 AND "locked_until" = $3;

-- retryAfter
UPDATE "jobs" SET "retry_after" = $1, "locked_until" = NULL, "last_error" = $2 WHERE "id" = $3 AND "locked_until" = $4;

-- dlNote
UPDATE "jobs" SET "headers" = $1, "last_error" = $2 WHERE "id" = $3 AND "locked_until" = $4;

-- dlMove
WITH moved AS (DELETE FROM "jobs" WHERE "id" = $1 AND "locked_until" = $2 RETURNING *) INSERT INTO "jobs_dead" ("id", "payload", "attempt", "retry_after", "locked_until", "headers", "created_at", "last_error") SELECT "id", "payload", "attempt", NULL, NULL, "headers", "created_at", "last_error" FROM moved;

-- hold
UPDATE "jobs" SET "retry_after" = $1, "locked_until" = NULL, "last_error" = $2 WHERE "id" = $3 AND "locked_until" = $4;

-- doneMany
DELETE FROM "jobs" WHERE "locked_until" = $1 AND "id" IN ($2, $3, $4);

-- release
UPDATE "jobs" SET "locked_until" = NULL WHERE "id" = $1 AND "locked_until" = $2;

-- unclaim
UPDATE "jobs" SET "locked_until" = NULL, "attempt" = "attempt" - 1 WHERE "id" = $1 AND "locked_until" = $2;

-- uncharge
UPDATE "jobs" SET "attempt" = "attempt" - 1 WHERE "id" = $1 AND "locked_until" = $2;

-- charge
UPDATE "jobs" SET "attempt" = "attempt" + 1 WHERE "id" = $1 AND "locked_until" = $2;

-- extend
UPDATE "jobs" SET "locked_until" = $1 WHERE "id" = $2 AND "locked_until" = $3;

-- lockIDs
SELECT "id" FROM "jobs" WHERE "id" IN ($1, $2, $3) FOR UPDATE SKIP LOCKED;

-- waitIDs
SELECT "id" FROM "jobs" WHERE "id" IN ($1, $2, $3) FOR UPDATE;

