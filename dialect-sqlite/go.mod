module github.com/settlehq/settle/dialect-sqlite

go 1.26

require (
	github.com/mattn/go-sqlite3 v1.14.53
	github.com/settlehq/settle/core v0.0.0
)

require go.uber.org/goleak v1.3.0

replace github.com/settlehq/settle/core => ../core
