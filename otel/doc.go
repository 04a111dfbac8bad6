// Package settleotel instruments settle services with OpenTelemetry: traces, metrics and the
// trace context carried in message headers. It lives in its own module
// (github.com/settlehq/settle/otel) so that core requires nothing.
//
// Give a Telemetry's AppOptions to core.New:
//
//	tel, err := settleotel.New(settleotel.WithTracerProvider(tp), settleotel.WithMeterProvider(mp))
//	app := core.New(append(tel.AppOptions(), core.WithLogger(log))...)
//
// # Traces
//
// Every delivery gets one span of kind consumer, named "process <queue>", that starts when its
// handler is called and ends when its settlement is durable (or has failed), so it covers the
// acknowledgement, the retry's UPDATE, the dead letter's move. It follows OpenTelemetry's
// messaging conventions — messaging.system (postgresql, mysql, sqlite, rabbitmq, nats),
// messaging.destination.name, messaging.destination.subscription.name,
// messaging.operation.type = process, messaging.message.id — and adds settle.attempt,
// settle.handler (what the handler returned), settle.outcome (what settle performed),
// settle.result (settled or failed), settle.retry.delay and settle.dead_letter.destination. Its
// status is Error, with error.type, when the handler failed (an error that is not an outcome,
// a panic, a payload that does not decode, a timeout), when the message went to a dead letter,
// or when the settlement could not be made durable. A delivery that core sends to the dead letter
// without calling its handler (past its cap, never settled) gets a span all the same.
//
// The handler's context carries the span, so what it does (queries, calls, publishing) is part
// of the delivery's trace. Publishers inject the W3C trace context into the headers of the
// messages they send (core.Propagator; the App's contexts carry the Telemetry's); the delivery's
// span links to the producer's span, or is its child with ChildOfProducer.
//
// # Metrics
//
// settle.messages.settled (counter, by settle.outcome and settle.result),
// messaging.process.duration (the handler, seconds), settle.message.latency (publication to
// durable settlement, seconds, where the backend knows when the message was published:
// core.Enqueued), settle.message.attempts (the attempt at settlement), settle.dead_letters,
// and, from the App's events, settle.copies.refused, settle.reconnects,
// settle.handler.overruns, settle.settlements.failed, settle.settlements.unknown,
// settle.source.failures and settle.messages.discarded. ObserveQueues
// adds the depth of queues by state from their ops Stats (settle.queue.messages,
// settle.queue.oldest_ready.age).
package settleotel
