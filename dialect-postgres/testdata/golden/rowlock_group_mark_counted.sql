-- claim
-- args: group, group, now, limit
SELECT "id", "payload", "attempt" + 1, "headers", "created_at" FROM "jobs" WHERE "grp" >= $1 AND "grp" <= $2 AND "processed_at" IS NULL AND ("retry_after" IS NULL OR "retry_after" <= $3) AND "locked_until" IS NULL ORDER BY "grp", "id" LIMIT $4 FOR UPDATE SKIP LOCKED;

-- done
UPDATE "jobs" SET "processed_at" = $1 WHERE "id" = $2;

-- retry
UPDATE "jobs" SET "attempt" = "attempt" + 1 WHERE "id" = $1;

-- retryAfter
UPDATE "jobs" SET "retry_after" = $1, "attempt" = "attempt" + 1 WHERE "id" = $2;

-- dlGroup
UPDATE "jobs" SET "grp" = $1, "retry_after" = NULL, "attempt" = "attempt" + 1, "headers" = $2 WHERE "id" = $3;

-- hold
UPDATE "jobs" SET "retry_after" = $1, "attempt" = "attempt" + 1 WHERE "id" = $2;

-- doneIDs
UPDATE "jobs" SET "processed_at" = $1 WHERE "id" IN ($2, $3, $4);

-- counted.done
UPDATE "jobs" SET "processed_at" = $1, "locked_until" = NULL WHERE "id" = $2;

-- counted.retry
UPDATE "jobs" SET "locked_until" = NULL WHERE "id" = $1;

-- counted.retryAfter
UPDATE "jobs" SET "retry_after" = $1, "locked_until" = NULL WHERE "id" = $2;

-- counted.dlGroup
UPDATE "jobs" SET "grp" = $1, "retry_after" = NULL, "locked_until" = NULL, "headers" = $2 WHERE "id" = $3;

-- counted.hold
UPDATE "jobs" SET "retry_after" = $1, "locked_until" = NULL WHERE "id" = $2;

-- countSel
-- args: group, group, now, limit
SELECT "id", "attempt" + 1 FROM "jobs" WHERE "grp" >= $1 AND "grp" <= $2 AND "processed_at" IS NULL AND ("retry_after" IS NULL OR "retry_after" <= $3) AND "locked_until" IS NULL ORDER BY "grp", "id" LIMIT $4 FOR UPDATE SKIP LOCKED;

-- countUpd
UPDATE "jobs" SET "attempt" = "attempt" + 1, "locked_until" = $1 WHERE "id" IN ($2, $3, $4);

-- lapsedSel
-- args: group, group, now, limit
SELECT "id", "attempt" + 1 FROM "jobs" WHERE "grp" >= $1 AND "grp" <= $2 AND "processed_at" IS NULL AND ("retry_after" IS NULL OR "retry_after" <= $3) AND "locked_until" IS NOT NULL ORDER BY "grp", "id" LIMIT $4 FOR UPDATE SKIP LOCKED;

-- untakeIDs
UPDATE "jobs" SET "attempt" = "attempt" - 1, "locked_until" = NULL WHERE "id" IN ($1, $2, $3);

-- relock
-- args: group, group, now
SELECT "id", "payload", "attempt", "headers", "created_at" FROM "jobs" WHERE "grp" >= $1 AND "grp" <= $2 AND "processed_at" IS NULL AND ("retry_after" IS NULL OR "retry_after" <= $3) AND "id" IN ($4, $5, $6) ORDER BY "id" FOR UPDATE SKIP LOCKED;

-- grouped
UPDATE "jobs" SET "processed_at" = $2 WHERE "id" = ANY($1);

