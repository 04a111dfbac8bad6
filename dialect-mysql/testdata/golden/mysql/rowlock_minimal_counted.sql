-- claim
-- args: limit
SELECT `id`, `payload`, 1, NULL, NULL FROM `jobs` FORCE INDEX (PRIMARY) WHERE 1 = 1 ORDER BY `id` LIMIT ? FOR UPDATE SKIP LOCKED;

-- done
DELETE FROM `jobs` WHERE `id` = ?;

-- doneIDs
DELETE `jobs` FROM `jobs` FORCE INDEX (PRIMARY) WHERE `id` IN (?, ?, ?);

-- grouped
DELETE `settle_q` FROM JSON_TABLE(?, '$[*]' COLUMNS(`settle_id` BIGINT PATH '$')) AS `settle_ids` STRAIGHT_JOIN `jobs` AS `settle_q` FORCE INDEX (PRIMARY) ON `settle_q`.`id` = `settle_ids`.`settle_id`;

