// Package redisq is settle's Redis Streams transport (folder transport-redis, package redisq,
// so that it does not clash with the client's package redis), built on
// github.com/redis/go-redis/v9. It needs Redis 7.0 or later.
//
// # Queues
//
// A Client is one go-redis client, registered with the App. NewQueue(client, "refunds") is an
// endpoint: the stream at that key and a consumer group on it (Group, default "settle"), created
// with the stream when missing. Every process that mounts the queue joins the group as a consumer
// of its own (a name made of host, process id and random bits), so they share its entries. A
// queue's stream is a work queue: settled entries are deleted from it, so give each stream one
// group.
//
// A message is a stream entry: its payload in the field "body" (BodyField), each header a field
// of its own.
//
// # Outcomes
//
// Each outcome is one Lua script, so its check and its changes are one step on the server:
//
//	ack, drop        XACK and XDEL: the entry leaves the pending list and the stream
//	retry            a copy at the stream's end with settle-retry-count = this attempt, then
//	                 XACK and XDEL of the original
//	retry after d    the copy goes to the delay set "<stream>:delayed" (a sorted set by due
//	                 time) instead; the queue's subscriptions move due copies to the stream's
//	                 end, atomically (a script), waking for their own delays and at least every
//	                 DelayPoll. The delay is never held only in a process.
//	dead letter      a copy with the dead-letter headers (settle-retry-count, settle-origin,
//	                 settle-dead-at, settle-error) added to the destination stream of
//	                 core.DeadLetterAfter, then XACK and XDEL
//	abandoned        left pending with its idle time set to the lease, so the next claim of
//	                 any consumer takes it
//
// # Attempts
//
// m.Attempt() is the entry's settle-retry-count (the attempts spent on earlier copies of the
// message; absent on a message as published) plus the pending list's delivery count of this
// entry: 1 when first read, raised by every claim of an entry whose earlier delivery never
// settled. Both live in Redis: the count field in the entry (stream, delay set), the delivery
// count in the group's pending list, so both survive a restart of the service, and a restart of
// Redis as far as its persistence goes (appendfsync always: everything acknowledged; everysec:
// the last second may be lost, and with it a delivery count raised in it, which gives one more
// delivery). A delivery that arrives past the cap never settled before: core moves it to its
// dead letter without calling the handler, with the reason "not settled after N attempts".
//
// # Leases and fencing
//
// An entry read by a consumer is leased to it for Lease (default 30s): the subscription resets
// its idle time every third of that (XCLAIM JUSTID) while the handler works, and an entry idle
// for longer — its consumer crashed, hung or lost the server — is claimed again by XAUTOCLAIM,
// which raises its delivery count. Every settlement and every extension first checks that the
// pending list still names the delivery's consumer and delivery count; when it does not, the
// entry belongs to a later claim and the settlement fails with ErrLeaseLost, changing nothing.
// A delivery claimed back is Suspect: core runs it alone.
//
// # Redis Cluster
//
// A queue's keys (the stream, its delay set, its dead-letter stream) are used together in one
// script, so on a cluster they must hash to one slot: name them with one hash tag
// ("{refunds}", "{refunds}.dead"). Redis replicates asynchronously: a failover can lose the
// writes of the last moments before it, settlements included (an entry acknowledged there comes
// back, at-least-once). Open with Cluster() connects to a cluster (go-redis's cluster URL).
//
// # Publishing
//
// A Queue is also its stream's core.Target: core.NewPublisher publishes to it (XADD, a batch in
// one pipeline; a delayed message to the delay set). Delivery.ID is the core.MessageID a message
// was published with, or the id of its first entry, and stays the same on its copies (IDField).
// A core.DedupKey is held in the stream's dedup index (DedupSuffix) until its message is
// acknowledged, dropped or dead-lettered; core.Priority is refused with a *core.UnsupportedError.
//
// # Operations
//
// NewOps returns a Queue's ops.Queue: stats by state, and its dead-letter stream's entries
// listed, shown, redriven (atomically, with their message ids) and purged.
//
// # Testing
//
// Package redistest starts redis-server binaries of its own for tests that restart or kill the
// server, and clusters of them; the module's tests run the conformance suite on the server at SETTLE_TEST_REDIS_URL.
package redisq
