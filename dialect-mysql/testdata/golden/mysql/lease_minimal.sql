-- claim
-- args: limit
SELECT `id`, `payload`, 1, NULL, NULL FROM `jobs` FORCE INDEX (PRIMARY) WHERE `locked_until` IS NULL ORDER BY `id` LIMIT ? FOR UPDATE SKIP LOCKED;

-- claim.2
-- args: token, id, id, id
UPDATE `jobs` FORCE INDEX (PRIMARY) SET `locked_until` = ? WHERE `id` IN (?, ?, ?);

-- rescue
-- args: now, limit
SELECT `id`, `payload`, 1, NULL, NULL FROM `jobs` FORCE INDEX (PRIMARY) WHERE `locked_until` IS NOT NULL AND `locked_until` <= ? ORDER BY `id` LIMIT ? FOR UPDATE SKIP LOCKED;

-- rescue.2
-- args: token, id, id, id
UPDATE `jobs` FORCE INDEX (PRIMARY) SET `locked_until` = ? WHERE `id` IN (?, ?, ?);

-- lapsedProbe
-- args: now
SELECT `id` FROM `jobs` FORCE INDEX (PRIMARY) WHERE `locked_until` IS NOT NULL AND `locked_until` <= ? ORDER BY `id` LIMIT 1 FOR UPDATE SKIP LOCKED;

-- done
DELETE FROM `jobs` WHERE `id` = ? AND `locked_until` = ?;

-- retry
UPDATE `jobs` SET `locked_until` = NULL WHERE `id` = ? AND `locked_until` = ?;

-- hold
UPDATE `jobs` SET `locked_until` = ? WHERE `id` = ? AND `locked_until` = ?;

-- doneMany
DELETE `jobs` FROM `jobs` FORCE INDEX (PRIMARY) WHERE `locked_until` = ? AND `id` IN (?, ?, ?);

-- release
UPDATE `jobs` SET `locked_until` = NULL WHERE `id` = ? AND `locked_until` = ?;

-- extend
UPDATE `jobs` SET `locked_until` = ? WHERE `id` = ? AND `locked_until` = ?;

-- lockIDs
SELECT `id` FROM `jobs` WHERE `id` IN (?, ?, ?) FOR UPDATE SKIP LOCKED;

-- waitIDs
SELECT `id` FROM `jobs` WHERE `id` IN (?, ?, ?) FOR UPDATE;

