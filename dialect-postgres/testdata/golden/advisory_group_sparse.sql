-- done
DELETE FROM "jobs" WHERE "id" = $1;

-- dlGroup
UPDATE "jobs" SET "grp" = $1 WHERE "id" = $2;

-- candidates
-- args: group, group, limit
SELECT "id", (tableoid::text || ':' || COALESCE(("id")::text, '')), 0 FROM "jobs" WHERE "grp" >= $1 AND "grp" <= $2 AND hashtextextended(('public.jobs:' || (tableoid::text || ':' || COALESCE(("id")::text, ''))), 0) NOT IN (SELECT (l.classid::bigint << 32) | l.objid::bigint FROM pg_locks l WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())) ORDER BY "grp", "id" LIMIT $3;

-- takeStamp
-- args: id, group, group
UPDATE "jobs" SET "attempt" = "attempt" + 1 WHERE "id" = $1 AND "grp" >= $2 AND "grp" <= $3;

-- takeRead
SELECT "payload", "attempt", NULL, NULL FROM "jobs" WHERE "id" = $1;

