package provider

import (
	"errors"
	"strings"

	"github.com/hangar-dev/hangar/internal/problem"
)

// imageMissing is ErrImageMissing.
type imageMissing struct{}

func (imageMissing) Error() string { return "image not available" }

// Problem is a bad request whose sentence is the provider's own words, which name the image
// and say how to get it, without the wrapping around them; else a general sentence.
func (e imageMissing) Problem(err error) *problem.Problem {
	said := providerSentence(err)
	said = strings.TrimSuffix(said, ": "+e.Error())
	said = strings.TrimPrefix(said, e.Error()+": ")
	if said == "" || said == e.Error() {
		said = "The sandbox's image is not available to its provider."
	}
	return problem.New(problem.CodeBadRequest, problem.Sentence(said), err)
}

// providerSentence finds, in err's tree, the error that wraps ErrImageMissing itself: the
// provider's message.
func providerSentence(err error) string {
	var children []error
	switch e := err.(type) {
	case interface{ Unwrap() error }:
		children = []error{e.Unwrap()}
	case interface{ Unwrap() []error }:
		children = e.Unwrap()
	}
	for _, c := range children {
		if c == ErrImageMissing {
			return err.Error()
		}
		if errors.Is(c, ErrImageMissing) {
			return providerSentence(c)
		}
	}
	return ""
}
