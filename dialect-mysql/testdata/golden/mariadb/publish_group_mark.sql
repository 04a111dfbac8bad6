-- publish delay=false headers=false
INSERT INTO `jobs` (`payload`, `grp`, `attempt`, `created_at`) VALUES (?, ?, ?, ?) RETURNING `id`;

-- publish delay=true headers=false
INSERT INTO `jobs` (`payload`, `grp`, `attempt`, `created_at`, `retry_after`) VALUES (?, ?, ?, ?, ?) RETURNING `id`;

-- publish delay=false headers=true
INSERT INTO `jobs` (`payload`, `grp`, `attempt`, `created_at`, `headers`) VALUES (?, ?, ?, ?, ?) RETURNING `id`;

-- publish delay=true headers=true
INSERT INTO `jobs` (`payload`, `grp`, `attempt`, `created_at`, `retry_after`, `headers`) VALUES (?, ?, ?, ?, ?, ?) RETURNING `id`;

