module github.com/settlehq/settle/chaos

go 1.26.0

require (
	github.com/go-sql-driver/mysql v1.10.1
	github.com/jackc/pgx/v5 v5.12.0
	github.com/mattn/go-sqlite3 v1.14.53
	github.com/nats-io/nats.go v1.55.0
	github.com/rabbitmq/amqp091-go v1.16.0
	github.com/settlehq/settle/core v0.1.0
	github.com/settlehq/settle/dialect-mysql v0.1.0
	github.com/settlehq/settle/dialect-postgres v0.1.0
	github.com/settlehq/settle/dialect-sqlite v0.1.0
	github.com/settlehq/settle/eventplugin v0.1.0
	github.com/settlehq/settle/transport-amqp v0.1.0
	github.com/settlehq/settle/transport-nats v0.1.0
)

require (
	filippo.io/edwards25519 v1.2.0 // indirect
	github.com/antithesishq/antithesis-sdk-go v0.9.0-default-no-op // indirect
	github.com/fatih/color v1.13.0 // indirect
	github.com/golang/protobuf v1.5.4 // indirect
	github.com/google/go-tpm v0.9.8 // indirect
	github.com/hashicorp/go-hclog v1.6.3 // indirect
	github.com/hashicorp/go-plugin v1.8.0 // indirect
	github.com/hashicorp/yamux v0.1.2 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/klauspost/compress v1.20.4 // indirect
	github.com/mattn/go-colorable v0.1.12 // indirect
	github.com/mattn/go-isatty v0.0.17 // indirect
	github.com/minio/highwayhash v1.0.4 // indirect
	github.com/nats-io/jwt/v2 v2.8.3 // indirect
	github.com/nats-io/nats-server/v2 v2.15.2 // indirect
	github.com/nats-io/nkeys v0.4.17 // indirect
	github.com/nats-io/nuid v1.0.1 // indirect
	github.com/oklog/run v1.1.0 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
	golang.org/x/text v0.43.0 // indirect
	golang.org/x/time v0.16.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260817212433-ac3dfec99bb1 // indirect
	google.golang.org/grpc v1.85.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

replace (
	github.com/settlehq/settle/core => ../core
	github.com/settlehq/settle/dialect-mysql => ../dialect-mysql
	github.com/settlehq/settle/dialect-postgres => ../dialect-postgres
	github.com/settlehq/settle/dialect-sqlite => ../dialect-sqlite
	github.com/settlehq/settle/eventplugin => ../eventplugin
	github.com/settlehq/settle/transport-amqp => ../transport-amqp
	github.com/settlehq/settle/transport-nats => ../transport-nats
)

tool github.com/nats-io/nats-server/v2
