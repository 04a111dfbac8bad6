// Package mysql is settle's SQL dialect for MySQL 8.0.1+ and MariaDB 10.6+, on
// github.com/go-sql-driver/mysql. It lives in the folder dialect-mysql; the package name is the
// last word, mysql.
//
// The flavour is read from SELECT VERSION() when the dialect starts (Detect), and an older server
// is refused with its version in the error. The two flavours differ where it matters: MariaDB
// has INSERT … RETURNING and DELETE … RETURNING, MySQL has neither; neither has
// UPDATE … RETURNING, so claims select with FOR UPDATE SKIP LOCKED and then stamp, in one
// transaction.
package mysql
