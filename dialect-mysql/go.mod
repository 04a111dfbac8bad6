module github.com/settlehq/settle/dialect-mysql

go 1.25.0

require (
	github.com/go-sql-driver/mysql v1.10.1
	github.com/settlehq/settle/core v0.1.0
)

require (
	filippo.io/edwards25519 v1.2.0 // indirect
	go.uber.org/goleak v1.3.0 // indirect
)

replace github.com/settlehq/settle/core => ../core
