-- claim
-- args: token, group, group, now, limit
UPDATE "jobs" SET "locked_until" = $1, "attempt" = "attempt" + 1 WHERE "id" IN (SELECT "id" FROM "jobs" WHERE "grp" >= $2 AND "grp" <= $3 AND "processed_at" IS NULL AND ("retry_after" IS NULL OR "retry_after" <= $4) AND "locked_until" IS NULL ORDER BY "grp", "id" LIMIT $5 FOR UPDATE SKIP LOCKED) RETURNING "id", "payload", "attempt", "headers", "created_at";

-- rescue
-- args: token, group, group, now, now, limit
UPDATE "jobs" SET "locked_until" = $1, "attempt" = "attempt" + 1 WHERE "id" IN (SELECT "id" FROM "jobs" WHERE "grp" >= $2 AND "grp" <= $3 AND "processed_at" IS NULL AND ("retry_after" IS NULL OR "retry_after" <= $4) AND "locked_until" IS NOT NULL AND "locked_until" <= $5 ORDER BY "grp", "id" LIMIT $6 FOR UPDATE SKIP LOCKED) RETURNING "id", "payload", "attempt", "headers", "created_at";

-- lapsedProbe
-- args: group, group, now, now
SELECT "id" FROM "jobs" WHERE "grp" >= $1 AND "grp" <= $2 AND "processed_at" IS NULL AND ("retry_after" IS NULL OR "retry_after" <= $3) AND "locked_until" IS NOT NULL AND "locked_until" <= $4 ORDER BY "grp", "id" LIMIT 1 FOR UPDATE SKIP LOCKED;

-- done
UPDATE "jobs" SET "processed_at" = $1, "locked_until" = NULL WHERE "id" = $2 AND "locked_until" = $3;

-- retry
UPDATE "jobs" SET "locked_until" = NULL WHERE "id" = $1 AND "locked_until" = $2;

-- retryAfter
UPDATE "jobs" SET "retry_after" = $1, "locked_until" = NULL WHERE "id" = $2 AND "locked_until" = $3;

-- dlGroup
UPDATE "jobs" SET "grp" = $1, "retry_after" = NULL, "locked_until" = NULL, "headers" = $2 WHERE "id" = $3 AND "locked_until" = $4;

-- hold
UPDATE "jobs" SET "retry_after" = $1, "locked_until" = NULL WHERE "id" = $2 AND "locked_until" = $3;

-- doneMany
UPDATE "jobs" SET "processed_at" = $1, "locked_until" = NULL WHERE "locked_until" = $2 AND "id" IN ($3, $4, $5);

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

