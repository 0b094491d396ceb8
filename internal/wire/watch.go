package wire

// Change is one change under a watched directory.
type Change struct {
	Seq  int64  `json:"seq"`
	TS   Time   `json:"ts"`
	Name string `json:"name"` // relative to the watched directory
	Type string `json:"type"` // create, write, remove, rename or chmod
}

// Changes is a page of a watch's changes: next is the since of the page after it; gap, when
// set, says which changes after since are no longer kept; watching is false when no one
// watches the directory (nothing to read).
type Changes struct {
	Changes  []Change `json:"events"`
	Next     int64    `json:"next"`
	Gap      *Gap     `json:"gap,omitempty"`
	Watching bool     `json:"watching"`
}

// Gap says what happened from from to to (a watch's seqs, a process's byte offsets) is no
// longer kept.
type Gap struct {
	From int64 `json:"from"`
	To   int64 `json:"to"`
	// Lost, for a process's output, says for a person that what it printed while no hangar
	// followed it is lost, and the offsets skipped are not a count of bytes. Empty: the output
	// was just dropped from the ring.
	Lost string `json:"lost,omitempty"`
}
