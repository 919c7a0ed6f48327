package logs_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/nodekit/nodekit/kuberuntime/logs"
)

func ExampleReader_ReadLogs() {
	dir, _ := os.MkdirTemp("", "logs-example-")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "0.log")
	t := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	var b []byte
	b = logs.AppendRecord(b, t, logs.Stdout, false, []byte("starting"))
	b = logs.AppendRecord(b, t.Add(time.Second), logs.Stderr, true, []byte("a long "))
	b = logs.AppendRecord(b, t.Add(2*time.Second), logs.Stderr, false, []byte("warning"))
	b = logs.AppendRecord(b, t.Add(3*time.Second), logs.Stdout, false, []byte("ready"))
	_ = os.WriteFile(path, b, 0o640)

	r, _ := logs.NewReader(logs.ReaderConfig{})
	err := r.ReadLogs(context.Background(), path, logs.Options{TailLines: 2, Timestamps: true}, nil, os.Stdout, os.Stdout)
	fmt.Println(err)
	// Output:
	// 2026-11-26T12:00:01.000000000Z a long warning
	// 2026-11-26T12:00:03.000000000Z ready
	// <nil>
}
