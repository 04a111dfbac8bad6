-- done
UPDATE `jobs` SET `processed_at` = ?, `locked_until` = NULL WHERE `id` = ?;

-- retry
UPDATE `jobs` SET `locked_until` = NULL WHERE `id` = ?;

-- retryAfter
UPDATE `jobs` SET `retry_after` = ?, `locked_until` = NULL WHERE `id` = ?;

-- dlGroup
UPDATE `jobs` SET `grp` = ?, `retry_after` = NULL, `locked_until` = NULL, `headers` = ? WHERE `id` = ?;

-- hold
UPDATE `jobs` SET `retry_after` = ?, `locked_until` = NULL WHERE `id` = ?;

-- candidates
-- args: group, now, limit
SELECT `id`, CAST(`id` AS CHAR), CASE WHEN `locked_until` IS NULL THEN 0 ELSE 1 END FROM `jobs` WHERE `grp` = ? AND `processed_at` IS NULL AND (`retry_after` IS NULL OR `retry_after` <= ?) AND IS_USED_LOCK(IF(CHAR_LENGTH(CONCAT(CONVERT(X'736574746C653A746573742E6A6F62733A' USING utf8mb4), CAST(`id` AS CHAR))) <= 64, CONCAT(CONVERT(X'736574746C653A746573742E6A6F62733A' USING utf8mb4), CAST(`id` AS CHAR)), CONCAT('settle#', LEFT(SHA2(CONCAT(CONVERT(X'736574746C653A746573742E6A6F62733A' USING utf8mb4), CAST(`id` AS CHAR)), 256), 57)))) IS NULL ORDER BY `id` LIMIT ?;

-- takeStamp
-- args: now, id, group, now
UPDATE `jobs` SET `attempt` = `attempt` + 1, `locked_until` = ? WHERE `id` = ? AND `grp` = ? AND `processed_at` IS NULL AND (`retry_after` IS NULL OR `retry_after` <= ?);

-- takeRead
SELECT `payload`, `attempt`, `headers`, `created_at` FROM `jobs` WHERE `id` = ?;

-- untake
UPDATE `jobs` SET `locked_until` = NULL, `attempt` = `attempt` - 1 WHERE `id` = ?;

