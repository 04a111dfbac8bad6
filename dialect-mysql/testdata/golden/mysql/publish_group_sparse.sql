-- publish delay=false headers=false
INSERT INTO `jobs` (`payload`, `grp`, `attempt`) VALUES (?, ?, ?);

-- publish delay=true headers=false
INSERT INTO `jobs` (`payload`, `grp`, `attempt`) VALUES (?, ?, ?);

-- publish delay=false headers=true
INSERT INTO `jobs` (`payload`, `grp`, `attempt`) VALUES (?, ?, ?);

-- publish delay=true headers=true
INSERT INTO `jobs` (`payload`, `grp`, `attempt`) VALUES (?, ?, ?);

