package driver

// Arg is a value a rendered statement binds per call: its statement is rendered once, with a
// Binder, and bound for each claim with Binder.Bind.
type Arg uint8

// The values a Binder binds.
const (
	// ArgNow is ClaimParams.Now, converted with Dialect.Time.
	ArgNow Arg = iota + 1
	// ArgToken is ClaimParams.Token, converted with Dialect.Time.
	ArgToken
	// ArgLimit is ClaimParams.Limit, as an int64.
	ArgLimit
	// ArgGroup is ClaimParams.Group.
	ArgGroup
	// ArgID is a row's id, bound by BindID.
	ArgID
)

func (a Arg) String() string {
	switch a {
	case ArgNow:
		return "now"
	case ArgToken:
		return "token"
	case ArgLimit:
		return "limit"
	case ArgGroup:
		return "group"
	case ArgID:
		return "id"
	}
	return "arg(?)"
}

// Binder renders a statement's placeholders in order and remembers which value each one
// takes, so that the statement is rendered once and bound per call. A dialect that spells its
// own claim renders its condition with Schema.Ready and one Binder, and binds the claim's
// values with Bind.
type Binder struct {
	d    Dialect
	args []Arg
}

// NewBinder returns a Binder of d's placeholders.
func NewBinder(d Dialect) *Binder { return &Binder{d: d} }

// Next renders the placeholder of the next argument, which takes a.
func (b *Binder) Next(a Arg) string {
	b.args = append(b.args, a)
	return b.d.Placeholder(len(b.args))
}

// Args lists the values the placeholders take, in order.
func (b *Binder) Args() []Arg { return b.args }

// Len is the number of placeholders rendered.
func (b *Binder) Len() int { return len(b.args) }

// Bind appends the values of p the placeholders take to dst, in order.
func (b *Binder) Bind(p ClaimParams, dst []any) []any {
	for _, a := range b.args {
		dst = b.bindOne(a, p, dst)
	}
	return dst
}

// BindID binds p as Bind does, with id for ArgID.
func (b *Binder) BindID(p ClaimParams, id int64, dst []any) []any {
	for _, a := range b.args {
		if a == ArgID {
			dst = append(dst, id)
			continue
		}
		dst = b.bindOne(a, p, dst)
	}
	return dst
}

func (b *Binder) bindOne(a Arg, p ClaimParams, dst []any) []any {
	switch a {
	case ArgNow:
		dst = append(dst, b.d.Time(p.Now))
	case ArgToken:
		dst = append(dst, b.d.Time(p.Token))
	case ArgLimit:
		dst = append(dst, int64(p.Limit))
	case ArgGroup:
		dst = append(dst, p.Group)
	}
	return dst
}
