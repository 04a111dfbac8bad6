-- done
UPDATE "jobs" SET "processed_at" = $1, "locked_until" = NULL WHERE "id" = $2;

-- retry
UPDATE "jobs" SET "locked_until" = NULL WHERE "id" = $1;

-- retryAfter
UPDATE "jobs" SET "retry_after" = $1, "locked_until" = NULL WHERE "id" = $2;

-- dlGroup
UPDATE "jobs" SET "grp" = $1, "retry_after" = NULL, "locked_until" = NULL, "headers" = $2 WHERE "id" = $3;

-- hold
UPDATE "jobs" SET "retry_after" = $1, "locked_until" = NULL WHERE "id" = $2;

-- candidates
-- args: group, group, now, limit
SELECT "id", (tableoid::text || ':' || COALESCE(((payload))::text, '')), CASE WHEN "locked_until" IS NULL THEN 0 ELSE 1 END FROM "jobs" WHERE "grp" >= $1 AND "grp" <= $2 AND "processed_at" IS NULL AND ("retry_after" IS NULL OR "retry_after" <= $3) AND hashtextextended(('public.jobs:' || (tableoid::text || ':' || COALESCE(((payload))::text, ''))), 0) NOT IN (SELECT (l.classid::bigint << 32) | l.objid::bigint FROM pg_locks l WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())) ORDER BY "grp", "id" LIMIT $4;

-- takeStamp
-- args: now, id, group, group, now
UPDATE "jobs" SET "attempt" = "attempt" + 1, "locked_until" = $1 WHERE "id" = $2 AND "grp" >= $3 AND "grp" <= $4 AND "processed_at" IS NULL AND ("retry_after" IS NULL OR "retry_after" <= $5);

-- takeRead
SELECT "payload", "attempt", "headers", "created_at" FROM "jobs" WHERE "id" = $1;

-- untake
UPDATE "jobs" SET "locked_until" = NULL, "attempt" = "attempt" - 1 WHERE "id" = $1;

