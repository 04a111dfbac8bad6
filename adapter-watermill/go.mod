module github.com/settlehq/settle/adapter-watermill

go 1.26.0

require (
	github.com/ThreeDotsLabs/watermill v1.5.1
	github.com/rabbitmq/amqp091-go v1.16.0
	github.com/settlehq/settle/core v0.1.0
	github.com/settlehq/settle/dialect-mysql v0.1.0
	github.com/settlehq/settle/dialect-postgres v0.1.0
	github.com/settlehq/settle/dialect-sqlite v0.1.0
	github.com/settlehq/settle/transport-amqp v0.1.0
)

require (
	filippo.io/edwards25519 v1.2.0 // indirect
	github.com/go-sql-driver/mysql v1.10.1 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/pgx/v5 v5.12.0 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/lithammer/shortuuid/v3 v3.0.7 // indirect
	github.com/mattn/go-sqlite3 v1.14.53 // indirect
	github.com/oklog/ulid v1.3.1 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	github.com/stretchr/testify v1.12.1 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/text v0.43.0 // indirect
)

replace github.com/settlehq/settle/core => ../core

replace github.com/settlehq/settle/dialect-sqlite => ../dialect-sqlite

replace github.com/settlehq/settle/dialect-postgres => ../dialect-postgres

replace github.com/settlehq/settle/dialect-mysql => ../dialect-mysql

replace github.com/settlehq/settle/transport-amqp => ../transport-amqp
