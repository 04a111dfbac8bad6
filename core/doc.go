// Package core is settle's contract: outcomes, verdicts, the Finisher every backend implements,
// typed handlers, codecs, the attempt cap and its dead letter, failure policies, workers and the
// App that runs it all with graceful shutdown.
//
// A handler returns an outcome as an error: nil acknowledges, Drop, Retry and RetryAfter say
// otherwise, and any other error takes the subscription's error policy. Core turns the outcome
// into a Verdict, applies the DeadLetterAfter cap in one place (Resolve), and hands the verdict
// to the backend's Finisher, which performs it as a statement on a queue table or a frame on a
// RabbitMQ channel:
//
//	backend claim/consume ─► Delivery ─► decode (Codec) ─► handler(ctx, *Message[T]) error
//	        ▲                                                        │
//	        └──── Finisher.Finish(ctx, delivery, Verdict) ◄── Resolve (cap ⇒ DeadLetter)
//
// Publishing is the same on every backend too: NewPublisher takes a backend's Target, and
// Publish, PublishBatch and the publish options (MessageID, Headers, CorrelationID, OrderingKey,
// DedupKey, Delay, NotBefore, Priority) mean the same everywhere; a backend that cannot honour an
// option refuses it with an *UnsupportedError. A handler declared with Replies produces messages
// with Reply that are published only when its delivery is acknowledged.
//
// SubscribeBatch mounts a BatchHandler that gets up to BatchSize messages per call and answers
// for all of them or for each (BatchResult); every message is still settled on its own through
// the same verdicts, and a backend whose Finisher is a BatchFinisher settles a batch together.
//
// The subpackages hold the parts every backend shares: clock (real and virtual time), coretest
// (an in-memory backend and a test harness on virtual time) and transporttest (the conformance
// suite every backend runs).
package core
