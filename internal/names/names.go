// Package names holds the rule for a sandbox's name, which the providers (folder, container and
// pod names), the sandbox package and auth (tokens bound to a sandbox) all check. It imports
// nothing of hangar's, so any package may use it.
package names

import "fmt"

// CheckSandbox reports whether name can name a sandbox: a lowercase DNS label (RFC 1123) of at
// most 63 characters, so every provider can use it in folder, container and pod names.
func CheckSandbox(name string) error {
	if name == "" || len(name) > 63 {
		return fmt.Errorf("sandbox name %q: must be 1 to 63 characters", name)
	}
	for i, c := range name {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '-' && i > 0 && i < len(name)-1:
		default:
			return fmt.Errorf("sandbox name %q: must be lowercase letters, digits and inner dashes", name)
		}
	}
	return nil
}
