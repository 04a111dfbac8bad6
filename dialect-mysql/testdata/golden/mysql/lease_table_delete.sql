-- claim
-- args: now, limit
SELECT `id`, `payload`, `attempt` + 1, `headers`, `created_at` FROM `jobs` FORCE INDEX (PRIMARY) WHERE (`retry_after` IS NULL OR `retry_after` <= ?) AND `locked_until` IS NULL ORDER BY `id` LIMIT ? FOR UPDATE SKIP LOCKED;

-- claim.2
-- args: token, id, id, id
UPDATE `jobs` FORCE INDEX (PRIMARY) SET `locked_until` = ?, `attempt` = `attempt` + 1 WHERE `id` IN (?, ?, ?);

-- rescue
-- args: now, now, limit
SELECT `id`, `payload`, `attempt` + 1, `headers`, `created_at` FROM `jobs` FORCE INDEX (PRIMARY) WHERE (`retry_after` IS NULL OR `retry_after` <= ?) AND `locked_until` IS NOT NULL AND `locked_until` <= ? ORDER BY `id` LIMIT ? FOR UPDATE SKIP LOCKED;

-- rescue.2
-- args: token, id, id, id
UPDATE `jobs` FORCE INDEX (PRIMARY) SET `locked_until` = ?, `attempt` = `attempt` + 1 WHERE `id` IN (?, ?, ?);

-- lapsedProbe
-- args: now, now
SELECT `id` FROM `jobs` FORCE INDEX (PRIMARY) WHERE (`retry_after` IS NULL OR `retry_after` <= ?) AND `locked_until` IS NOT NULL AND `locked_until` <= ? ORDER BY `id` LIMIT 1 FOR UPDATE SKIP LOCKED;

-- done
DELETE FROM `jobs` WHERE `id` = ? AND `locked_until` = ?;

-- retry
UPDATE `jobs` SET `locked_until` = NULL, `last_error` = ? WHERE `id` = ? AND `locked_until` = ?;

-- retryAfter
UPDATE `jobs` SET `retry_after` = ?, `locked_until` = NULL, `last_error` = ? WHERE `id` = ? AND `locked_until` = ?;

-- dlNote
UPDATE `jobs` SET `headers` = ?, `last_error` = ? WHERE `id` = ? AND `locked_until` = ?;

-- dlCopy
INSERT INTO `jobs_dead` (`id`, `payload`, `attempt`, `retry_after`, `locked_until`, `headers`, `created_at`, `last_error`) SELECT `id`, `payload`, `attempt`, NULL, NULL, `headers`, `created_at`, `last_error` FROM `jobs` WHERE `id` = ? AND `locked_until` = ?;

-- dlDelete
DELETE FROM `jobs` WHERE `id` = ? AND `locked_until` = ?;

-- hold
UPDATE `jobs` SET `retry_after` = ?, `locked_until` = NULL, `last_error` = ? WHERE `id` = ? AND `locked_until` = ?;

-- doneMany
DELETE `jobs` FROM `jobs` FORCE INDEX (PRIMARY) WHERE `locked_until` = ? AND `id` IN (?, ?, ?);

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

