// Package notests has no tests.
package notests
