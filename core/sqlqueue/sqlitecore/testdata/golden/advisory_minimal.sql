-- done
DELETE FROM "jobs" WHERE "id" = ?;

-- candidates
-- args: limit
SELECT "id", CAST("id" AS TEXT), 0 FROM "jobs" WHERE 1 = 1 ORDER BY "id" LIMIT ?;

-- takeStamp
-- args: id
UPDATE "jobs" SET "id" = "id" WHERE "id" = ? AND 1 = 1;

-- takeRead
SELECT "payload", 1, NULL, NULL FROM "jobs" WHERE "id" = ?;

