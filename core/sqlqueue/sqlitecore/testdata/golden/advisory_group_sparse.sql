-- done
DELETE FROM "jobs" WHERE "id" = ?;

-- dlGroup
UPDATE "jobs" SET "grp" = ? WHERE "id" = ?;

-- candidates
-- args: group, limit
SELECT "id", CAST("id" AS TEXT), 0 FROM "jobs" WHERE "grp" = ? ORDER BY "id" LIMIT ?;

-- takeStamp
-- args: id, group
UPDATE "jobs" SET "attempt" = "attempt" + 1 WHERE "id" = ? AND "grp" = ?;

-- takeRead
SELECT "payload", "attempt", NULL, NULL FROM "jobs" WHERE "id" = ?;

