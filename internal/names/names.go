// Package names holds the rule of the names hangar is given for things: a sandbox's or a
// session's name, which the providers use in folder, container and pod names and auth in tokens
// bound to a sandbox. It imports nothing of hangar's, so any package may use it. What the kernel
// bounds in the processes a sandbox runs is package limits'.
package names

import "fmt"

// CheckSandbox reports whether name can name a sandbox: a lowercase DNS label (RFC 1123) of at
// most 63 characters, so every provider can use it in folder, container and pod names.
func CheckSandbox(name string) error { return CheckLabel("sandbox name", name) }

// CheckLabel reports whether name is a lowercase DNS label (RFC 1123) of at most 63 characters,
// the rule of every name hangar gives things (sandboxes, sessions); what says which name it is,
// for the error.
func CheckLabel(what, name string) error {
	if name == "" || len(name) > 63 {
		return fmt.Errorf("%s %.70q: must be 1 to 63 characters", what, name)
	}
	for i, c := range name {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '-' && i > 0 && i < len(name)-1:
		default:
			return fmt.Errorf("%s %q: must be lowercase letters, digits and inner dashes", what, name)
		}
	}
	return nil
}
