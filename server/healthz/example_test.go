package healthz_test

import (
	"errors"
	"fmt"
	"net/http/httptest"

	"github.com/nodekit/nodekit/server/healthz"
)

// A stuck sync loop fails /healthz; the reason stays in the logs.
func Example() {
	hz, _ := healthz.New(healthz.Config{Checks: healthz.Checks{SyncLoop: func() error { return errors.New("stuck") }}})
	w := httptest.NewRecorder()
	hz.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/healthz", nil))
	fmt.Println(w.Code)
	fmt.Print(w.Body.String())
	// Output:
	// 500
	// [+]ping ok
	// [+]log ok
	// [-]syncloop failed: reason withheld
	// healthz check failed
}
