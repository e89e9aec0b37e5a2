package fsm

// ApplyEntry decodes and applies one log entry committed in raft term term,
// as the replica does (DecodeCommand, then Apply): the tests' way to apply
// encoded commands.
func (f *FSM) ApplyEntry(term uint64, data []byte) (Result, []Trigger, error) {
	c, err := DecodeCommand(data)
	if err != nil {
		return Result{}, nil, err
	}
	r, t := f.Apply(term, c)
	return r, t, nil
}
