package systemd_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/nodeshutdown"
	"github.com/nodekit/nodekit/nodeshutdown/systemd"
)

// Without a system bus the setup fails with ErrBus (Run logs it and tries
// again every second, the agent runs on).
func Example() {
	m, err := nodeshutdown.New(nodeshutdown.Config{
		GracePeriod: 30 * time.Second, GracePeriodCriticalPods: 10 * time.Second,
		ActivePods: func() []*v1.Pod { return nil },
		KillPod:    func(context.Context, *v1.Pod, int64, func(*v1.PodStatus)) error { return nil },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	i, err := systemd.New(systemd.Config{
		Manager: m,
		Connect: func(context.Context) (systemd.Conn, error) { return nil, errors.New("no system bus") },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	err = i.Setup(context.Background())
	fmt.Println(err)
	fmt.Println("ErrBus:", errors.Is(err, systemd.ErrBus), "locked:", i.Locked())
	// Output:
	// nodeshutdown/systemd: D-Bus: no system bus
	// ErrBus: true locked: false
}
