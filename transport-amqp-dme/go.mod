module github.com/settlehq/settle/transport-amqp-dme

go 1.25.0

require (
	github.com/rabbitmq/amqp091-go v1.16.0
	github.com/settlehq/settle/core v0.1.0
	github.com/settlehq/settle/transport-amqp v0.1.0
)

replace (
	github.com/settlehq/settle/core => ../core
	github.com/settlehq/settle/transport-amqp => ../transport-amqp
)
