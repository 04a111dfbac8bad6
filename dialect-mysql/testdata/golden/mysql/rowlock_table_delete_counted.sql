-- claim
-- args: now, limit
SELECT `id`, `payload`, `attempt` + 1, `headers`, `created_at` FROM `jobs` FORCE INDEX (PRIMARY) WHERE (`retry_after` IS NULL OR `retry_after` <= ?) AND `locked_until` IS NULL ORDER BY `id` LIMIT ? FOR UPDATE SKIP LOCKED;

-- done
DELETE FROM `jobs` WHERE `id` = ?;

-- retry
UPDATE `jobs` SET `attempt` = `attempt` + 1, `last_error` = ? WHERE `id` = ?;

-- retryAfter
UPDATE `jobs` SET `retry_after` = ?, `attempt` = `attempt` + 1, `last_error` = ? WHERE `id` = ?;

-- dlNote
UPDATE `jobs` SET `headers` = ?, `last_error` = ? WHERE `id` = ?;

-- dlCopy
INSERT INTO `jobs_dead` (`id`, `payload`, `attempt`, `retry_after`, `locked_until`, `headers`, `created_at`, `last_error`) SELECT `id`, `payload`, `attempt` + 1, NULL, NULL, `headers`, `created_at`, `last_error` FROM `jobs` WHERE `id` = ?;

-- dlDelete
DELETE FROM `jobs` WHERE `id` = ?;

-- hold
UPDATE `jobs` SET `retry_after` = ?, `attempt` = `attempt` + 1, `last_error` = ? WHERE `id` = ?;

-- doneIDs
DELETE `jobs` FROM `jobs` FORCE INDEX (PRIMARY) WHERE `id` IN (?, ?, ?);

-- counted.done
DELETE FROM `jobs` WHERE `id` = ?;

-- counted.retry
UPDATE `jobs` SET `locked_until` = NULL, `last_error` = ? WHERE `id` = ?;

-- counted.retryAfter
UPDATE `jobs` SET `retry_after` = ?, `locked_until` = NULL, `last_error` = ? WHERE `id` = ?;

-- counted.dlNote
UPDATE `jobs` SET `headers` = ?, `last_error` = ? WHERE `id` = ?;

-- counted.dlCopy
INSERT INTO `jobs_dead` (`id`, `payload`, `attempt`, `retry_after`, `locked_until`, `headers`, `created_at`, `last_error`) SELECT `id`, `payload`, `attempt`, NULL, NULL, `headers`, `created_at`, `last_error` FROM `jobs` WHERE `id` = ?;

-- counted.dlDelete
DELETE FROM `jobs` WHERE `id` = ?;

-- counted.hold
UPDATE `jobs` SET `retry_after` = ?, `locked_until` = NULL, `last_error` = ? WHERE `id` = ?;

-- countSel
-- args: now, limit
SELECT `id`, `attempt` + 1 FROM `jobs` FORCE INDEX (PRIMARY) WHERE (`retry_after` IS NULL OR `retry_after` <= ?) AND `locked_until` IS NULL ORDER BY `id` LIMIT ? FOR UPDATE SKIP LOCKED;

-- countUpd
UPDATE `jobs` SET `attempt` = `attempt` + 1, `locked_until` = ? WHERE `id` IN (?, ?, ?);

-- lapsedSel
-- args: now, limit
SELECT `id`, `attempt` + 1 FROM `jobs` FORCE INDEX (PRIMARY) WHERE (`retry_after` IS NULL OR `retry_after` <= ?) AND `locked_until` IS NOT NULL ORDER BY `id` LIMIT ? FOR UPDATE SKIP LOCKED;

-- untakeIDs
UPDATE `jobs` SET `attempt` = `attempt` - 1, `locked_until` = NULL WHERE `id` IN (?, ?, ?);

-- relock
-- args: now
SELECT `id`, `payload`, `attempt`, `headers`, `created_at` FROM `jobs` FORCE INDEX (PRIMARY) WHERE (`retry_after` IS NULL OR `retry_after` <= ?) AND `id` IN (?, ?, ?) ORDER BY `id` FOR UPDATE SKIP LOCKED;

-- grouped
DELETE `settle_q` FROM JSON_TABLE(?, '$[*]' COLUMNS(`settle_id` BIGINT PATH '$')) AS `settle_ids` STRAIGHT_JOIN `jobs` AS `settle_q` FORCE INDEX (PRIMARY) ON `settle_q`.`id` = `settle_ids`.`settle_id`;

