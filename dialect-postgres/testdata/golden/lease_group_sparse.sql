-- claim
-- args: token, group, group, limit
UPDATE "jobs" SET "locked_until" = $1, "attempt" = "attempt" + 1 WHERE "id" IN (SELECT "id" FROM "jobs" WHERE "grp" >= $2 AND "grp" <= $3 AND "locked_until" IS NULL ORDER BY "grp", "id" LIMIT $4 FOR UPDATE SKIP LOCKED) RETURNING "id", "payload", "attempt", NULL, NULL;

-- rescue
-- args: token, group, group, now, limit
UPDATE "jobs" SET "locked_until" = $1, "attempt" = "attempt" + 1 WHERE "id" IN (SELECT "id" FROM "jobs" WHERE "grp" >= $2 AND "grp" <= $3 AND "locked_until" IS NOT NULL AND "locked_until" <= $4 ORDER BY "grp", "id" LIMIT $5 FOR UPDATE SKIP LOCKED) RETURNING "id", "payload", "attempt", NULL, NULL;

-- lapsedProbe
-- args: group, group, now
SELECT "id" FROM "jobs" WHERE "grp" >= $1 AND "grp" <= $2 AND "locked_until" IS NOT NULL AND "locked_until" <= $3 ORDER BY "grp", "id" LIMIT 1 FOR UPDATE SKIP LOCKED;

-- done
DELETE FROM "jobs" WHERE "id" = $1 AND "locked_until" = $2;

-- retry
UPDATE "jobs" SET "locked_until" = NULL WHERE "id" = $1 AND "locked_until" = $2;

-- dlGroup
UPDATE "jobs" SET "grp" = $1, "locked_until" = NULL WHERE "id" = $2 AND "locked_until" = $3;

-- hold
UPDATE "jobs" SET "locked_until" = $1 WHERE "id" = $2 AND "locked_until" = $3;

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

