package core

// Reply is a message a handler produced with (*Publisher[T]).Reply, published as part of its
// delivery's acknowledgement: to Target, as Message.
type Reply struct {
	// Target is where the reply is published: its Publisher's target.
	Target Target
	// Message is the reply, encoded, with its options resolved (its ID is always set: the
	// MessageID given, or the stable id ReplyID derives).
	Message Outgoing
}

// ReplySettler is implemented by a Finisher that can publish replies atomically with an
// acknowledgement: a SQL finisher whose INSERTs into a queue table of the same database run in
// the settlement's transaction, so nothing is published if the settlement rolls back and nothing
// is lost if it commits. Core asks once, when the subscription opens, for each target its
// handler declared (Replies); the replies to the targets it settles arrive in the ack's
// Verdict.Replies, and the Finisher publishes them with the ack. Core publishes the replies to
// every other target itself, confirmed, before it calls Finish with the ack.
type ReplySettler interface {
	// SettlesReplies reports whether the Finisher publishes replies to t with its
	// acknowledgements.
	SettlesReplies(t Target) bool
}
