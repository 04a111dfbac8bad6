-- done
DELETE FROM `jobs` WHERE `id` = ?;

-- dlGroup
UPDATE `jobs` SET `grp` = ? WHERE `id` = ?;

-- candidates
-- args: group, limit
SELECT `id`, CAST((payload) AS CHAR), 0 FROM `jobs` WHERE `grp` = ? AND IS_USED_LOCK(IF(CHAR_LENGTH(CONCAT(CONVERT(X'736574746C653A746573742E6A6F62733A' USING utf8mb4), CAST((payload) AS CHAR))) <= 64, CONCAT(CONVERT(X'736574746C653A746573742E6A6F62733A' USING utf8mb4), CAST((payload) AS CHAR)), CONCAT('settle#', LEFT(SHA2(CONCAT(CONVERT(X'736574746C653A746573742E6A6F62733A' USING utf8mb4), CAST((payload) AS CHAR)), 256), 57)))) IS NULL ORDER BY `id` LIMIT ?;

-- takeStamp
-- args: id, group
UPDATE `jobs` SET `attempt` = `attempt` + 1 WHERE `id` = ? AND `grp` = ?;

-- takeRead
SELECT `payload`, `attempt`, NULL, NULL FROM `jobs` WHERE `id` = ?;

