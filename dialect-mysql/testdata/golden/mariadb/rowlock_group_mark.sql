-- claim
-- args: group, now, limit
SELECT `id`, `payload`, `attempt` + 1, `headers`, `created_at` FROM `jobs` FORCE INDEX (`jobs_ready`) WHERE `grp` = ? AND `processed_at` IS NULL AND (`retry_after` IS NULL OR `retry_after` <= ?) AND `locked_until` IS NULL ORDER BY `id` LIMIT ? FOR UPDATE SKIP LOCKED;

-- done
UPDATE `jobs` SET `processed_at` = ? WHERE `id` = ?;

-- retry
UPDATE `jobs` SET `attempt` = `attempt` + 1 WHERE `id` = ?;

-- retryAfter
UPDATE `jobs` SET `retry_after` = ?, `attempt` = `attempt` + 1 WHERE `id` = ?;

-- dlGroup
UPDATE `jobs` SET `grp` = ?, `retry_after` = NULL, `attempt` = `attempt` + 1, `headers` = ? WHERE `id` = ?;

-- hold
UPDATE `jobs` SET `retry_after` = ?, `attempt` = `attempt` + 1 WHERE `id` = ?;

-- doneIDs
UPDATE `jobs` FORCE INDEX (PRIMARY) SET `processed_at` = ? WHERE `id` IN (?, ?, ?);

-- counted.done
UPDATE `jobs` SET `processed_at` = ?, `locked_until` = NULL WHERE `id` = ?;

-- counted.retry
UPDATE `jobs` SET `locked_until` = NULL WHERE `id` = ?;

-- counted.retryAfter
UPDATE `jobs` SET `retry_after` = ?, `locked_until` = NULL WHERE `id` = ?;

-- counted.dlGroup
UPDATE `jobs` SET `grp` = ?, `retry_after` = NULL, `locked_until` = NULL, `headers` = ? WHERE `id` = ?;

-- counted.hold
UPDATE `jobs` SET `retry_after` = ?, `locked_until` = NULL WHERE `id` = ?;

-- countSel
-- args: group, now, limit
SELECT `id`, `attempt` + 1 FROM `jobs` FORCE INDEX (`jobs_ready`) WHERE `grp` = ? AND `processed_at` IS NULL AND (`retry_after` IS NULL OR `retry_after` <= ?) AND `locked_until` IS NULL ORDER BY `id` LIMIT ? FOR UPDATE SKIP LOCKED;

-- countUpd
UPDATE `jobs` SET `attempt` = `attempt` + 1, `locked_until` = ? WHERE `id` IN (?, ?, ?);

-- lapsedSel
-- args: group, now, limit
SELECT `id`, `attempt` + 1 FROM `jobs` FORCE INDEX (`jobs_ready`) WHERE `grp` = ? AND `processed_at` IS NULL AND (`retry_after` IS NULL OR `retry_after` <= ?) AND `locked_until` IS NOT NULL ORDER BY `id` LIMIT ? FOR UPDATE SKIP LOCKED;

-- untakeIDs
UPDATE `jobs` SET `attempt` = `attempt` - 1, `locked_until` = NULL WHERE `id` IN (?, ?, ?);

-- relock
-- args: group, now
SELECT `id`, `payload`, `attempt`, `headers`, `created_at` FROM `jobs` FORCE INDEX (`jobs_ready`) WHERE `grp` = ? AND `processed_at` IS NULL AND (`retry_after` IS NULL OR `retry_after` <= ?) AND `id` IN (?, ?, ?) ORDER BY `id` FOR UPDATE SKIP LOCKED;

-- grouped
UPDATE JSON_TABLE(?, '$[*]' COLUMNS(`settle_id` BIGINT PATH '$')) AS `settle_ids` STRAIGHT_JOIN `jobs` AS `settle_q` FORCE INDEX (PRIMARY) ON `settle_q`.`id` = `settle_ids`.`settle_id` SET `settle_q`.`processed_at` = ?;

