-- claim
-- args: token, limit
UPDATE "jobs" SET "locked_until" = $1 WHERE "id" IN (SELECT "id" FROM "jobs" WHERE "locked_until" IS NULL ORDER BY "id" LIMIT $2 FOR UPDATE SKIP LOCKED) RETURNING "id", "payload", 1, NULL, NULL;

-- rescue
-- args: token, now, limit
UPDATE "jobs" SET "locked_until" = $1 WHERE "id" IN (SELECT "id" FROM "jobs" WHERE "locked_until" IS NOT NULL AND "locked_until" <= $2 ORDER BY "id" LIMIT $3 FOR UPDATE SKIP LOCKED) RETURNING "id", "payload", 1, NULL, NULL;

-- lapsedProbe
-- args: now
SELECT "id" FROM "jobs" WHERE "locked_until" IS NOT NULL AND "locked_until" <= $1 ORDER BY "id" LIMIT 1 FOR UPDATE SKIP LOCKED;

-- done
DELETE FROM "jobs" WHERE "id" = $1 AND "locked_until" = $2;

-- retry
UPDATE "jobs" SET "locked_until" = NULL WHERE "id" = $1 AND "locked_until" = $2;

-- hold
UPDATE "jobs" SET "locked_until" = $1 WHERE "id" = $2 AND "locked_until" = $3;

-- doneMany
DELETE FROM "jobs" WHERE "locked_until" = $1 AND "id" IN ($2, $3, $4);

-- release
UPDATE "jobs" SET "locked_until" = NULL WHERE "id" = $1 AND "locked_until" = $2;

-- extend
UPDATE "jobs" SET "locked_until" = $1 WHERE "id" = $2 AND "locked_until" = $3;

-- lockIDs
SELECT "id" FROM "jobs" WHERE "id" IN ($1, $2, $3) FOR UPDATE SKIP LOCKED;

-- waitIDs
SELECT "id" FROM "jobs" WHERE "id" IN ($1, $2, $3) FOR UPDATE;

