// Package amqp is settle's RabbitMQ transport (folder transport-amqp, package amqp), built on
// github.com/rabbitmq/amqp091-go.
//
// The transport talks to RabbitMQ only through the Connection and Channel interfaces in this
// package. Dial wraps a real amqp091-go connection in them; the amqptest subpackage implements
// them with an in-process broker on a virtual clock, so the same code runs against both.
package amqp
