-- claim
-- args: group, now, limit
SELECT `id`, `payload`, `attempt` + 1, `headers`, `created_at` FROM `jobs` FORCE INDEX (`jobs_ready`) WHERE `grp` = ? AND `processed_at` IS NULL AND (`retry_after` IS NULL OR `retry_after` <= ?) AND `locked_until` IS NULL ORDER BY `id` LIMIT ? FOR UPDATE SKIP LOCKED;

-- claim.2
-- args: token, id, id, id
UPDATE `jobs` FORCE INDEX (PRIMARY) SET `locked_until` = ?, `attempt` = `attempt` + 1 WHERE `id` IN (?, ?, ?);

-- rescue
-- args: group, now, now, limit
SELECT `id`, `payload`, `attempt` + 1, `headers`, `created_at` FROM `jobs` FORCE INDEX (`jobs_ready`) WHERE `grp` = ? AND `processed_at` IS NULL AND (`retry_after` IS NULL OR `retry_after` <= ?) AND `locked_until` IS NOT NULL AND `locked_until` <= ? ORDER BY `id` LIMIT ? FOR UPDATE SKIP LOCKED;

-- rescue.2
-- args: token, id, id, id
UPDATE `jobs` FORCE INDEX (PRIMARY) SET `locked_until` = ?, `attempt` = `attempt` + 1 WHERE `id` IN (?, ?, ?);

-- lapsedProbe
-- args: group, now, now
SELECT `id` FROM `jobs` FORCE INDEX (`jobs_ready`) WHERE `grp` = ? AND `processed_at` IS NULL AND (`retry_after` IS NULL OR `retry_after` <= ?) AND `locked_until` IS NOT NULL AND `locked_until` <= ? ORDER BY `id` LIMIT 1 FOR UPDATE SKIP LOCKED;

-- done
UPDATE `jobs` SET `processed_at` = ?, `locked_until` = NULL WHERE `id` = ? AND `locked_until` = ?;

-- retry
UPDATE `jobs` SET `locked_until` = NULL, `last_error` = ? WHERE `id` = ? AND `locked_until` = ?;

-- retryAfter
UPDATE `jobs` SET `retry_after` = ?, `locked_until` = NULL, `last_error` = ? WHERE `id` = ? AND `locked_until` = ?;

-- dlGroup
UPDATE `jobs` SET `grp` = ?, `retry_after` = NULL, `locked_until` = NULL, `headers` = ?, `last_error` = ? WHERE `id` = ? AND `locked_until` = ?;

-- hold
UPDATE `jobs` SET `retry_after` = ?, `locked_until` = NULL, `last_error` = ? WHERE `id` = ? AND `locked_until` = ?;

-- doneMany
UPDATE `jobs` FORCE INDEX (PRIMARY) SET `processed_at` = ?, `locked_until` = NULL WHERE `locked_until` = ? AND `id` IN (?, ?, ?);

-- release
UPDATE `jobs` SET `locked_until` = NULL WHERE `id` = ? AND `locked_until` = ?;

-- unclaim
UPDATE `jobs` SET `locked_until` = NULL, `attempt` = `attempt` - 1 WHERE `id` = ? AND `locked_until` = ?;

-- uncharge
UPDATE `jobs` SET `attempt` = `attempt` - 1 WHERE `id` = ? AND `locked_until` = ?;

-- charge
UPDATE `jobs` SET `attempt` = `attempt` + 1 WHERE `id` = ? AND `locked_until` = ?;

-- extend
UPDATE `jobs` SET `locked_until` = ? WHERE `id` = ? AND `locked_until` = ?;

-- lockIDs
SELECT `id` FROM `jobs` WHERE `id` IN (?, ?, ?) FOR UPDATE SKIP LOCKED;

-- waitIDs
SELECT `id` FROM `jobs` WHERE `id` IN (?, ?, ?) FOR UPDATE;

