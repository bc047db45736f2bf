package gotok_test

import (
	"flag"
	"fmt"
	"os"
	"testing"
)

// TestMain skips the examples in a checkout without ../shared beside it
// (a clone elsewhere): they load its model by the path a reader would
// type, where the other tests look for it (internal/sharedtest) and skip.
func TestMain(m *testing.M) {
	flag.Parse()
	if _, err := os.Stat("../shared/models/stories260K.gguf"); err != nil && flag.Lookup("test.skip").Value.String() == "" {
		fmt.Fprintln(os.Stderr, "examples skipped: ../shared/models/stories260K.gguf is not beside the checkout")
		flag.Set("test.skip", "^Example")
	}
	os.Exit(m.Run())
}
