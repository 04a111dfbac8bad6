-- publish delay=false headers=false
INSERT INTO `jobs` (`payload`) VALUES (?) RETURNING `id`;

-- publish delay=true headers=false
INSERT INTO `jobs` (`payload`) VALUES (?) RETURNING `id`;

-- publish delay=false headers=true
INSERT INTO `jobs` (`payload`) VALUES (?) RETURNING `id`;

-- publish delay=true headers=true
INSERT INTO `jobs` (`payload`) VALUES (?) RETURNING `id`;

