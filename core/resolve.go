package core

// Resolve applies a subscription's DeadLetterAfter cap to a verdict. It is the one place where
// a retry becomes a dead letter, for every backend: a Retry or RetryAfter at attempt >= limit
// becomes DeadLetter(dest), its Cause a *DeadLetterError saying what was asked at which attempt
// (wrapping the handler's cause). Backends whose server also counts deliveries (a RabbitMQ quorum
// queue's delivery limit, a JetStream consumer's MaxDeliver) keep that only as a backstop for
// deliveries that never settle. A limit of 0 means no cap.
func Resolve(v Verdict, attempt, limit int, dest string) Verdict {
	if limit <= 0 {
		return v
	}
	if (v.Action == ActRetry || v.Action == ActRetryAfter) && attempt >= limit {
		asked := v
		asked.Cause = nil
		return Verdict{Action: ActDeadLetter, Dest: dest,
			Cause: &DeadLetterError{Attempt: attempt, Cap: limit, Asked: asked, Err: v.Cause}}
	}
	return v
}

// notSettled is the verdict of a delivery that arrives past its cap: none of its earlier
// deliveries settled (the process died in the handler, hung past its lease, or was stopped),
// so it goes to the dead letter without its handler being called again.
func notSettled(attempt, limit int, dest string) Verdict {
	return Verdict{Action: ActDeadLetter, Dest: dest,
		Cause: &DeadLetterError{Attempt: attempt, Cap: limit, NotSettled: true}}
}
