package problem

import (
	"errors"
	"strings"
	"unicode"

	"github.com/hangar-dev/hangar/internal/provider"
)

// imageMissing is the sentence for a sandbox whose image (or template) its provider does not
// have: the provider's own words, which name the image and say how to get it, without the
// wrapping around them. It falls back to a general sentence.
func imageMissing(err error) string {
	said := providerSentence(err)
	said = strings.TrimSuffix(said, ": "+provider.ErrImageMissing.Error())
	said = strings.TrimPrefix(said, provider.ErrImageMissing.Error()+": ")
	if said == "" || said == provider.ErrImageMissing.Error() {
		return "The sandbox's image is not available to its provider."
	}
	r := []rune(said)
	r[0] = unicode.ToUpper(r[0])
	return strings.TrimSuffix(string(r), ".") + "."
}

// providerSentence finds, in err's tree, the error that wraps provider.ErrImageMissing itself:
// the provider's message.
func providerSentence(err error) string {
	var children []error
	switch e := err.(type) {
	case interface{ Unwrap() error }:
		children = []error{e.Unwrap()}
	case interface{ Unwrap() []error }:
		children = e.Unwrap()
	}
	for _, c := range children {
		if c == provider.ErrImageMissing {
			return err.Error()
		}
		if errors.Is(c, provider.ErrImageMissing) {
			return providerSentence(c)
		}
	}
	return ""
}
