module github.com/settlehq/settle/core/limit/sqllimit/dbtest

go 1.26.0

require (
	github.com/settlehq/settle/core v0.1.0
	github.com/settlehq/settle/dialect-mysql v0.1.0
	github.com/settlehq/settle/dialect-postgres v0.1.0
	github.com/settlehq/settle/dialect-sqlite v0.1.0
)

require (
	filippo.io/edwards25519 v1.2.0 // indirect
	github.com/go-sql-driver/mysql v1.10.1 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/pgx/v5 v5.12.0 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/mattn/go-sqlite3 v1.14.53 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/text v0.43.0 // indirect
)

replace (
	github.com/settlehq/settle/core => ../../..
	github.com/settlehq/settle/dialect-mysql => ../../../../dialect-mysql
	github.com/settlehq/settle/dialect-postgres => ../../../../dialect-postgres
	github.com/settlehq/settle/dialect-sqlite => ../../../../dialect-sqlite
)
