// Package coretest is settle's test support: an in-memory backend (Broker) whose attempts the
// runtime counts, with in-process delays and dead-letter queues on a virtual clock, and a
// Harness that runs an App on it so a test can publish, wait for settlements, Advance time and
// assert what happened — without sleeping. The Broker's queues are also core.Targets honouring
// every publish option, and RequirePublished asserts in one line that code published a message.
// Recorder and Logs are the pieces backend suites reuse; ServerUnavailable is how a server suite
// skips (or, under SETTLE_REQUIRE_SERVERS=1, fails).
package coretest
