-- publish delay=false headers=false
INSERT INTO `jobs` (`payload`, `grp`, `attempt`, `created_at`) VALUES (?, ?, ?, ?);

-- publish delay=true headers=false
INSERT INTO `jobs` (`payload`, `grp`, `attempt`, `created_at`, `retry_after`) VALUES (?, ?, ?, ?, ?);

-- publish delay=false headers=true
INSERT INTO `jobs` (`payload`, `grp`, `attempt`, `created_at`, `headers`) VALUES (?, ?, ?, ?, ?);

-- publish delay=true headers=true
INSERT INTO `jobs` (`payload`, `grp`, `attempt`, `created_at`, `retry_after`, `headers`) VALUES (?, ?, ?, ?, ?, ?);

