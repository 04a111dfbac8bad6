package core

// Resolve applies a subscription's DeadLetterAfter cap to a verdict. It is the one place where
// a retry becomes a dead letter: where the runtime counts attempts (SQL tables, classic AMQP
// queues, the in-memory queue) a Retry or RetryAfter at attempt >= limit becomes
// DeadLetter(dest); where the server counts (serverCounts, a quorum queue with a delivery limit)
// the retry passes through and the server moves the message itself. A limit of 0 means no cap.
func Resolve(v Verdict, attempt, limit int, dest string, serverCounts bool) Verdict {
	if limit <= 0 || serverCounts {
		return v
	}
	if (v.Action == ActRetry || v.Action == ActRetryAfter) && attempt >= limit {
		return Verdict{Action: ActDeadLetter, Dest: dest, Cause: v.Cause}
	}
	return v
}
