// Package dbtest runs the flow-control proofs of core/coretest against sqllimit on real
// databases: SQLite always, PostgreSQL and MariaDB when reachable (MySQL 8 when
// SETTLE_TEST_MYSQL_URL names one). It is a module of its own so that core needs no driver.
package dbtest
