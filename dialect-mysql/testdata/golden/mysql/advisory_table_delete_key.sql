-- done
DELETE FROM `jobs` WHERE `id` = ?;

-- retry
UPDATE `jobs` SET `locked_until` = NULL, `last_error` = ? WHERE `id` = ?;

-- retryAfter
UPDATE `jobs` SET `retry_after` = ?, `locked_until` = NULL, `last_error` = ? WHERE `id` = ?;

-- dlNote
UPDATE `jobs` SET `headers` = ?, `last_error` = ? WHERE `id` = ?;

-- dlCopy
INSERT INTO `jobs_dead` (`id`, `payload`, `attempt`, `retry_after`, `locked_until`, `headers`, `created_at`, `last_error`) SELECT `id`, `payload`, `attempt`, NULL, NULL, `headers`, `created_at`, `last_error` FROM `jobs` WHERE `id` = ?;

-- dlDelete
DELETE FROM `jobs` WHERE `id` = ?;

-- hold
UPDATE `jobs` SET `retry_after` = ?, `locked_until` = NULL, `last_error` = ? WHERE `id` = ?;

-- candidates
-- args: now, limit
SELECT `id`, CAST((payload) AS CHAR), CASE WHEN `locked_until` IS NULL THEN 0 ELSE 1 END FROM `jobs` WHERE (`retry_after` IS NULL OR `retry_after` <= ?) AND IS_USED_LOCK(IF(CHAR_LENGTH(CONCAT(CONVERT(X'736574746C653A746573742E6A6F62733A' USING utf8mb4), CAST((payload) AS CHAR))) <= 64, CONCAT(CONVERT(X'736574746C653A746573742E6A6F62733A' USING utf8mb4), CAST((payload) AS CHAR)), CONCAT('settle#', LEFT(SHA2(CONCAT(CONVERT(X'736574746C653A746573742E6A6F62733A' USING utf8mb4), CAST((payload) AS CHAR)), 256), 57)))) IS NULL ORDER BY `id` LIMIT ?;

-- takeStamp
-- args: now, id, now
UPDATE `jobs` SET `attempt` = `attempt` + 1, `locked_until` = ? WHERE `id` = ? AND (`retry_after` IS NULL OR `retry_after` <= ?);

-- takeRead
SELECT `payload`, `attempt`, `headers`, `created_at` FROM `jobs` WHERE `id` = ?;

-- untake
UPDATE `jobs` SET `locked_until` = NULL, `attempt` = `attempt` - 1 WHERE `id` = ?;

