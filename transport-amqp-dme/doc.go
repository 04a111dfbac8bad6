// Package amqpdme (folder transport-amqp-dme, package amqpdme) is settle's opt-in delay for
// RabbitMQ through the rabbitmq_delayed_message_exchange plugin: an amqp.Delay that parks the
// copy of a RetryAfter in an exchange of type x-delayed-message, where each message waits for
// its own delay, so a short delay never waits behind a long one (unlike amqp.DLXTTL's waiting
// queue, which releases only from its head).
//
//	dme, err := amqpdme.New()                 // exchange "<queue>.delay" per queue
//	refunds, err := amqp.Classic(broker, "refunds", amqp.WithDelay(dme))
//	err = core.Subscribe(app, refunds, handle, core.DeadLetterAfter(5, "refunds.dead"))
//
// A handler's core.RetryAfter(d) then publishes a copy of the message — same body, properties
// and user headers, settle-retry-count raised by one, x-delay = d in milliseconds (rounded up) —
// to the delayed exchange with the queue's name as routing key, and acknowledges the original
// on the same channel (publish first: a crash between the two duplicates, never loses). When
// the delay is over the plugin routes the copy to the queue, which is bound to the exchange
// under its own name. The copy is a new message with its count raised, so
// core.DeadLetterAfter stops a delayed loop exactly like an immediate one, on classic and quorum
// queues alike.
//
// The plugin keeps persistent messages on disk (in Mnesia), so a copy survives a restart of the
// service. It must be enabled on the server
// (rabbitmq-plugins enable rabbitmq_delayed_message_exchange); a server without it refuses the
// exchange type with 503 COMMAND_INVALID, which closes the connection, and the subscription
// fails to start with a *PluginError (errors.Is(err, ErrPluginMissing)).
//
// Topology: with amqp.DeclareTopology(true) the subscription declares the exchange (durable,
// x-delayed-type=direct) and the binding; otherwise it checks passively that the exchange exists
// and refuses to start without it (*amqp.TopologyError, amqp.ErrNotFound). AMQP cannot check a
// binding passively: an exchange declared elsewhere must be bound to the queue with the queue's
// name as routing key.
//
// Tests: amqptest emulates the exchange type on its virtual clock (and refuses it with
// amqptest.WithoutDelayedMessagePlugin, as a server without the plugin does). The real-broker
// tests run only when SETTLE_TEST_AMQP_DME_URL names a RabbitMQ with the plugin.
package amqpdme
