package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	httppprof "net/http/pprof"
	"strings"
	"time"
)

// controlHandler serves the simulator's control API (loopback only):
//
//	GET  /nodes                   every node's state (JSON)
//	POST /nodes/{glob}/{action}   start, stop, kill or restart the nodes matching glob
//	GET  /report                  the last report (JSON)
//
// With pprof, Go's profiles are served under /debug/pprof/ too.
func controlHandler(sim *simulator, rep *reporter, pprof bool) http.Handler {
	mux := http.NewServeMux()
	if pprof {
		mux.HandleFunc("GET /debug/pprof/", httppprof.Index)
		mux.HandleFunc("GET /debug/pprof/profile", httppprof.Profile)
	}
	mux.HandleFunc("GET /nodes", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, sim.states())
	})
	mux.HandleFunc("GET /report", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, rep.measure())
	})
	mux.HandleFunc("POST /nodes/{glob}/{action}", func(w http.ResponseWriter, r *http.Request) {
		names, err := sim.act(r.PathValue("action"), r.PathValue("glob"))
		if err != nil && len(names) == 0 {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		res := map[string]any{"nodes": names}
		if err != nil {
			res["error"] = err.Error()
		}
		writeJSON(w, http.StatusOK, res)
	})
	return mux
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// serveControl serves h on addr, which must be a loopback address, until
// ctx ends; ready gets the address it listens on.
func serveControl(ctx context.Context, addr string, h http.Handler, ready func(net.Addr)) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--control %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("--control %q: only a loopback address (127.0.0.1:PORT, [::1]:PORT)", addr)
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	ready(lis.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lis) }()
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-errc
		return nil
	case err := <-errc:
		return err
	}
}

// readCommands reads commands, one a line, from r until it ends or ctx
// does: "start|stop|kill|restart GLOB", "nodes", "report". Answers go to
// out.
func readCommands(ctx context.Context, r io.Reader, sim *simulator, rep *reporter, out io.Writer) {
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
	}()
	for {
		var line string
		var ok bool
		select {
		case <-ctx.Done():
			return
		case line, ok = <-lines:
			if !ok {
				return
			}
		}
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
		case len(f) == 1 && f[0] == "nodes":
			for _, st := range sim.states() {
				fmt.Fprintf(out, "%s %s starts=%d pods=%d %s\n", st.Name, st.State, st.Starts, st.Pods, st.Error)
			}
		case len(f) == 1 && f[0] == "report":
			fmt.Fprintln(out, rep.measure())
		case len(f) == 2:
			names, err := sim.act(f[0], f[1])
			if err != nil {
				fmt.Fprintln(out, "error:", err)
			}
			if len(names) > 0 {
				fmt.Fprintf(out, "%s: %d node(s): %s\n", f[0], len(names), abbreviate(names))
			}
		default:
			fmt.Fprintln(out, "error:", errors.New("commands: start|stop|kill|restart GLOB, nodes, report"))
		}
	}
}

func abbreviate(names []string) string {
	if len(names) <= 5 {
		return strings.Join(names, " ")
	}
	return fmt.Sprintf("%s ... %s", strings.Join(names[:3], " "), names[len(names)-1])
}
