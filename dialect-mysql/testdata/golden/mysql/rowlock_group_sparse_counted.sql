-- claim
-- args: group, limit
SELECT `id`, `payload`, `attempt` + 1, NULL, NULL FROM `jobs` FORCE INDEX (`jobs_ready`) WHERE `grp` = ? ORDER BY `id` LIMIT ? FOR UPDATE SKIP LOCKED;

-- done
DELETE FROM `jobs` WHERE `id` = ?;

-- retry
UPDATE `jobs` SET `attempt` = `attempt` + 1 WHERE `id` = ?;

-- dlGroup
UPDATE `jobs` SET `grp` = ?, `attempt` = `attempt` + 1 WHERE `id` = ?;

-- doneIDs
DELETE `jobs` FROM `jobs` FORCE INDEX (PRIMARY) WHERE `id` IN (?, ?, ?);

-- counted.done
DELETE FROM `jobs` WHERE `id` = ?;

-- counted.dlGroup
UPDATE `jobs` SET `grp` = ? WHERE `id` = ?;

-- countSel
-- args: group, limit
SELECT `id`, `attempt` + 1 FROM `jobs` FORCE INDEX (`jobs_ready`) WHERE `grp` = ? ORDER BY `id` LIMIT ? FOR UPDATE SKIP LOCKED;

-- countUpd
UPDATE `jobs` SET `attempt` = `attempt` + 1 WHERE `id` IN (?, ?, ?);

-- relock
-- args: group
SELECT `id`, `payload`, `attempt`, NULL, NULL FROM `jobs` FORCE INDEX (`jobs_ready`) WHERE `grp` = ? AND `id` IN (?, ?, ?) ORDER BY `id` FOR UPDATE SKIP LOCKED;

-- grouped
DELETE `settle_q` FROM JSON_TABLE(?, '$[*]' COLUMNS(`settle_id` BIGINT PATH '$')) AS `settle_ids` STRAIGHT_JOIN `jobs` AS `settle_q` FORCE INDEX (PRIMARY) ON `settle_q`.`id` = `settle_ids`.`settle_id`;

