module github.com/settlehq/settle/dialect-sqlite

go 1.25.0

require (
	github.com/mattn/go-sqlite3 v1.14.53
	github.com/settlehq/settle/core v0.1.0
)

require go.uber.org/goleak v1.3.0

replace github.com/settlehq/settle/core => ../core
