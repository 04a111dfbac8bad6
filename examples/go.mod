module github.com/settlehq/settle/examples

go 1.26

require (
	github.com/settlehq/settle/core v0.0.0
	github.com/settlehq/settle/dialect-sqlite v0.0.0
)

require github.com/mattn/go-sqlite3 v1.14.53 // indirect

replace (
	github.com/settlehq/settle/core => ../core
	github.com/settlehq/settle/dialect-sqlite => ../dialect-sqlite
)
