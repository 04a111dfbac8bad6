-- claim
-- args: limit
SELECT "id", "payload", 1, NULL, NULL FROM "jobs" WHERE 1 = 1 ORDER BY "id" LIMIT $1 FOR UPDATE SKIP LOCKED;

-- done
DELETE FROM "jobs" WHERE "id" = $1;

-- doneIDs
DELETE FROM "jobs" WHERE "id" IN ($1, $2, $3);

-- grouped
DELETE FROM "jobs" WHERE "id" = ANY($1);

