package eviction

import (
	"errors"
	"testing"
)

// A percentage that rounds to 0% or 100% in float32 would silently disable
// the threshold (issue 23, item 8): it is refused unless written exactly
// as 0% or 100%.
func TestPercentRoundingToDisableRefused(t *testing.T) {
	for _, val := range []string{"99.999999999%", "99.9999999%", "0.00000000000000000000000000000000000000000000001%", "100.00000001%"} {
		if _, err := ParseThresholds(map[string]string{"memory.available": val}, nil, nil, nil); !errors.Is(err, ErrInvalidThreshold) {
			t.Errorf("%s: err = %v, want ErrInvalidThreshold", val, err)
		}
	}
	for _, val := range []string{"0%", "100%", "100.0%", "0.000%"} {
		th, err := ParseThresholds(map[string]string{"memory.available": val}, nil, nil, nil)
		if err != nil || len(th) != 0 {
			t.Errorf("%s: %v, %v; want the threshold disabled", val, th, err)
		}
	}
	th, err := ParseThresholds(map[string]string{"memory.available": "99.99%"}, nil, nil, nil)
	if err != nil || len(th) != 1 {
		t.Errorf("99.99%%: %v, %v; want one threshold", th, err)
	}
}
