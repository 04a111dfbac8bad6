-- claim
-- args: group, group, limit
SELECT "id", "payload", "attempt" + 1, NULL, NULL FROM "jobs" WHERE "grp" >= $1 AND "grp" <= $2 ORDER BY "grp", "id" LIMIT $3 FOR UPDATE SKIP LOCKED;

-- done
DELETE FROM "jobs" WHERE "id" = $1;

-- retry
UPDATE "jobs" SET "attempt" = "attempt" + 1 WHERE "id" = $1;

-- dlGroup
UPDATE "jobs" SET "grp" = $1, "attempt" = "attempt" + 1 WHERE "id" = $2;

-- doneIDs
DELETE FROM "jobs" WHERE "id" IN ($1, $2, $3);

-- counted.done
DELETE FROM "jobs" WHERE "id" = $1;

-- counted.dlGroup
UPDATE "jobs" SET "grp" = $1 WHERE "id" = $2;

-- countSel
-- args: group, group, limit
SELECT "id", "attempt" + 1 FROM "jobs" WHERE "grp" >= $1 AND "grp" <= $2 ORDER BY "grp", "id" LIMIT $3 FOR UPDATE SKIP LOCKED;

-- countUpd
UPDATE "jobs" SET "attempt" = "attempt" + 1 WHERE "id" IN ($1, $2, $3);

-- relock
-- args: group, group
SELECT "id", "payload", "attempt", NULL, NULL FROM "jobs" WHERE "grp" >= $1 AND "grp" <= $2 AND "id" IN ($3, $4, $5) ORDER BY "id" FOR UPDATE SKIP LOCKED;

-- grouped
DELETE FROM "jobs" WHERE "id" = ANY($1);

