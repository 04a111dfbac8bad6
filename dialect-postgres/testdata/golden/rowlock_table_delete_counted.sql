-- claim
-- args: now, limit
SELECT "id", "payload", "attempt" + 1, "headers", "created_at" FROM "jobs" WHERE ("retry_after" IS NULL OR "retry_after" <= $1) AND "locked_until" IS NULL ORDER BY "id" LIMIT $2 FOR UPDATE SKIP LOCKED;

-- done
DELETE FROM "jobs" WHERE "id" = $1;

-- retry
UPDATE "jobs" SET "attempt" = "attempt" + 1, "last_error" = $1 WHERE "id" = $2;

-- retryAfter
UPDATE "jobs" SET "retry_after" = $1, "attempt" = "attempt" + 1, "last_error" = $2 WHERE "id" = $3;

-- dlNote
UPDATE "jobs" SET "headers" = $1, "last_error" = $2 WHERE "id" = $3;

-- dlMove
WITH moved AS (DELETE FROM "jobs" WHERE "id" = $1 RETURNING *) INSERT INTO "jobs_dead" ("id", "payload", "attempt", "retry_after", "locked_until", "headers", "created_at", "last_error") SELECT "id", "payload", "attempt" + 1, NULL, NULL, "headers", "created_at", "last_error" FROM moved;

-- hold
UPDATE "jobs" SET "retry_after" = $1, "attempt" = "attempt" + 1, "last_error" = $2 WHERE "id" = $3;

-- doneIDs
DELETE FROM "jobs" WHERE "id" IN ($1, $2, $3);

-- counted.done
DELETE FROM "jobs" WHERE "id" = $1;

-- counted.retry
UPDATE "jobs" SET "locked_until" = NULL, "last_error" = $1 WHERE "id" = $2;

-- counted.retryAfter
UPDATE "jobs" SET "retry_after" = $1, "locked_until" = NULL, "last_error" = $2 WHERE "id" = $3;

-- counted.dlNote
UPDATE "jobs" SET "headers" = $1, "last_error" = $2 WHERE "id" = $3;

-- counted.dlMove
WITH moved AS (DELETE FROM "jobs" WHERE "id" = $1 RETURNING *) INSERT INTO "jobs_dead" ("id", "payload", "attempt", "retry_after", "locked_until", "headers", "created_at", "last_error") SELECT "id", "payload", "attempt", NULL, NULL, "headers", "created_at", "last_error" FROM moved;

-- counted.hold
UPDATE "jobs" SET "retry_after" = $1, "locked_until" = NULL, "last_error" = $2 WHERE "id" = $3;

-- countSel
-- args: now, limit
SELECT "id", "attempt" + 1 FROM "jobs" WHERE ("retry_after" IS NULL OR "retry_after" <= $1) AND "locked_until" IS NULL ORDER BY "id" LIMIT $2 FOR UPDATE SKIP LOCKED;

-- countUpd
UPDATE "jobs" SET "attempt" = "attempt" + 1, "locked_until" = $1 WHERE "id" IN ($2, $3, $4);

-- lapsedSel
-- args: now, limit
SELECT "id", "attempt" + 1 FROM "jobs" WHERE ("retry_after" IS NULL OR "retry_after" <= $1) AND "locked_until" IS NOT NULL ORDER BY "id" LIMIT $2 FOR UPDATE SKIP LOCKED;

-- untakeIDs
UPDATE "jobs" SET "attempt" = "attempt" - 1, "locked_until" = NULL WHERE "id" IN ($1, $2, $3);

-- relock
-- args: now
SELECT "id", "payload", "attempt", "headers", "created_at" FROM "jobs" WHERE ("retry_after" IS NULL OR "retry_after" <= $1) AND "id" IN ($2, $3, $4) ORDER BY "id" FOR UPDATE SKIP LOCKED;

-- grouped
DELETE FROM "jobs" WHERE "id" = ANY($1);

