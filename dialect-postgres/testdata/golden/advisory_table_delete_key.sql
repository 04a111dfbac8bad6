-- done
DELETE FROM "jobs" WHERE "id" = $1;

-- retry
UPDATE "jobs" SET "locked_until" = NULL, "last_error" = $1 WHERE "id" = $2;

-- retryAfter
UPDATE "jobs" SET "retry_after" = $1, "locked_until" = NULL, "last_error" = $2 WHERE "id" = $3;

-- dlNote
UPDATE "jobs" SET "headers" = $1, "last_error" = $2 WHERE "id" = $3;

-- dlMove
WITH moved AS (DELETE FROM "jobs" WHERE "id" = $1 RETURNING *) INSERT INTO "jobs_dead" ("id", "payload", "attempt", "retry_after", "locked_until", "headers", "created_at", "last_error") SELECT "id", "payload", "attempt", NULL, NULL, "headers", "created_at", "last_error" FROM moved;

-- hold
UPDATE "jobs" SET "retry_after" = $1, "locked_until" = NULL, "last_error" = $2 WHERE "id" = $3;

-- candidates
-- args: now, limit
SELECT "id", (tableoid::text || ':' || COALESCE(((payload))::text, '')), CASE WHEN "locked_until" IS NULL THEN 0 ELSE 1 END FROM "jobs" WHERE ("retry_after" IS NULL OR "retry_after" <= $1) AND hashtextextended(('public.jobs:' || (tableoid::text || ':' || COALESCE(((payload))::text, ''))), 0) NOT IN (SELECT (l.classid::bigint << 32) | l.objid::bigint FROM pg_locks l WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())) ORDER BY "id" LIMIT $2;

-- takeStamp
-- args: now, id, now
UPDATE "jobs" SET "attempt" = "attempt" + 1, "locked_until" = $1 WHERE "id" = $2 AND ("retry_after" IS NULL OR "retry_after" <= $3);

-- takeRead
SELECT "payload", "attempt", "headers", "created_at" FROM "jobs" WHERE "id" = $1;

-- untake
UPDATE "jobs" SET "locked_until" = NULL, "attempt" = "attempt" - 1 WHERE "id" = $1;

