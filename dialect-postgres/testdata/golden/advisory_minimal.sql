-- done
DELETE FROM "jobs" WHERE "id" = $1;

-- candidates
-- args: limit
SELECT "id", (tableoid::text || ':' || COALESCE(("id")::text, '')), 0 FROM "jobs" WHERE 1 = 1 AND hashtextextended(('public.jobs:' || (tableoid::text || ':' || COALESCE(("id")::text, ''))), 0) NOT IN (SELECT (l.classid::bigint << 32) | l.objid::bigint FROM pg_locks l WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())) ORDER BY "id" LIMIT $1;

-- takeStamp
-- args: id
UPDATE "jobs" SET "id" = "id" WHERE "id" = $1 AND 1 = 1;

-- takeRead
SELECT "payload", 1, NULL, NULL FROM "jobs" WHERE "id" = $1;

