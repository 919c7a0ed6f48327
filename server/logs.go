package server

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
)

func metaTypeMeta(kind string) metav1.TypeMeta { return metav1.TypeMeta{Kind: kind, APIVersion: "v1"} }

// checkNames refuses path names that are not valid Kubernetes names (so
// no "..", slash or other path trick reaches a look-up): a namespace and a
// container are DNS labels, a pod name a DNS subdomain.
func checkNames(namespace, pod, container string, withContainer bool) error {
	if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
		return fmt.Errorf("%w: invalid namespace %q: %s", ErrBadRequest, namespace, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(pod); len(errs) > 0 {
		return fmt.Errorf("%w: invalid pod name %q: %s", ErrBadRequest, pod, strings.Join(errs, "; "))
	}
	if withContainer {
		if errs := validation.IsDNS1123Label(container); len(errs) > 0 {
			return fmt.Errorf("%w: invalid container name %q: %s", ErrBadRequest, container, strings.Join(errs, "; "))
		}
	}
	return nil
}

// decodeLogOptions reads v1.PodLogOptions from the query as the kubelet
// does (API v1 parameter conversion): the legacy "tail" ("all" = no
// limit), booleans true unless "false" or "0", integers and an RFC 3339
// sinceTime.
func decodeLogOptions(q url.Values) (*v1.PodLogOptions, error) {
	if tail := q.Get("tail"); tail != "" {
		q = cloneValues(q)
		if tail == "all" {
			delete(q, "tailLines")
		} else {
			q["tailLines"] = []string{tail}
		}
	}
	o := &v1.PodLogOptions{}
	steps := []struct {
		key string
		f   func(in []string) error
	}{
		{"container", func(in []string) error { o.Container = in[0]; return nil }},
		{"follow", func(in []string) error { return runtime.Convert_Slice_string_To_bool(&in, &o.Follow, nil) }},
		{"previous", func(in []string) error { return runtime.Convert_Slice_string_To_bool(&in, &o.Previous, nil) }},
		{"timestamps", func(in []string) error { return runtime.Convert_Slice_string_To_bool(&in, &o.Timestamps, nil) }},
		{"insecureSkipTLSVerifyBackend", func(in []string) error {
			return runtime.Convert_Slice_string_To_bool(&in, &o.InsecureSkipTLSVerifyBackend, nil)
		}},
		{"sinceSeconds", func(in []string) error {
			return runtime.Convert_Slice_string_To_Pointer_int64(&in, &o.SinceSeconds, nil)
		}},
		{"tailLines", func(in []string) error { return runtime.Convert_Slice_string_To_Pointer_int64(&in, &o.TailLines, nil) }},
		{"limitBytes", func(in []string) error { return runtime.Convert_Slice_string_To_Pointer_int64(&in, &o.LimitBytes, nil) }},
		{"sinceTime", func(in []string) error { return metav1.Convert_Slice_string_To_Pointer_v1_Time(&in, &o.SinceTime, nil) }},
		{"stream", func(in []string) error { s := in[0]; o.Stream = &s; return nil }},
	}
	for _, st := range steps {
		in := q[st.key]
		if len(in) == 0 {
			continue
		}
		if err := st.f(in); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrBadRequest, st.key, err)
		}
	}
	return o, nil
}

func cloneValues(q url.Values) url.Values {
	out := make(url.Values, len(q))
	for k, v := range q {
		out[k] = v
	}
	return out
}

// validateLogOptions is the API's PodLogOptions validation.
func validateLogOptions(o *v1.PodLogOptions) error {
	switch {
	case o.TailLines != nil && *o.TailLines < 0:
		return fmt.Errorf("tailLines: must be greater than or equal to 0")
	case o.LimitBytes != nil && *o.LimitBytes < 1:
		return fmt.Errorf("limitBytes: must be greater than 0")
	case o.SinceSeconds != nil && o.SinceTime != nil:
		return fmt.Errorf("at most one of `sinceTime` or `sinceSeconds` may be specified")
	case o.SinceSeconds != nil && *o.SinceSeconds < 1:
		return fmt.Errorf("sinceSeconds: must be greater than 0")
	}
	if o.Stream != nil {
		switch *o.Stream {
		case v1.LogStreamAll, v1.LogStreamStdout, v1.LogStreamStderr:
		default:
			return fmt.Errorf("stream: unsupported value %q", *o.Stream)
		}
		if *o.Stream != v1.LogStreamAll && o.TailLines != nil {
			return fmt.Errorf("`tailLines` and specific `stream` are mutually exclusive for now")
		}
	}
	return nil
}

// hasContainer reports whether pod has a container, init container or
// ephemeral container named name.
func hasContainer(pod *v1.Pod, name string) bool {
	for _, c := range pod.Spec.Containers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		if c.Name == name {
			return true
		}
	}
	return false
}

// flushWriter flushes after every write, so a followed log reaches the
// client as it is written.
type flushWriter struct {
	w io.Writer
	f http.Flusher
}

func (f flushWriter) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	if n > 0 {
		f.f.Flush()
	}
	return n, err
}

// serveContainerLogs serves /containerLogs/{namespace}/{pod}/{container}
// with the kubelet's answers: 400 for bad names or parameters that do not
// decode, 422 for invalid ones, 404 for an unknown pod or container, 400
// when reading the log fails (nothing written yet).
func (s *Server) serveContainerLogs(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Logs == nil {
		http.Error(w, "container logs are not available", http.StatusNotImplemented)
		return
	}
	ns, name, container := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	if err := checkNames(ns, name, container, true); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	opts, err := decodeLogOptions(r.URL.Query())
	if err != nil {
		http.Error(w, `{"message": "Unable to decode query."}`, http.StatusBadRequest)
		return
	}
	if err := validateLogOptions(opts); err != nil {
		http.Error(w, `{"message": "Invalid request."}`, http.StatusUnprocessableEntity)
		return
	}
	// The kubelet 1.36 has split streams (PodLogsQuerySplitStreams) off.
	if opts.Stream != nil && *opts.Stream != v1.LogStreamAll {
		http.Error(w, fmt.Sprintf("unable to return the given log stream: %q", *opts.Stream), http.StatusBadRequest)
		return
	}
	pod, ok := s.findPod(ns, name)
	if !ok {
		http.Error(w, fmt.Sprintf("pod %q does not exist", name), http.StatusNotFound)
		return
	}
	if !hasContainer(pod, container) {
		http.Error(w, fmt.Sprintf("container %q not found in pod %q", container, name), http.StatusNotFound)
		return
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "response cannot be flushed", http.StatusInternalServerError)
		return
	}
	cw := &countingWriter{w: flushWriter{w: w, f: fl}}
	if err := s.cfg.Logs.GetContainerLogs(r.Context(), pod, container, opts, cw, cw); err != nil {
		if cw.n == 0 {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.log.Debug("container log stream ended with an error")
	}
}

// countingWriter counts what was written, so an error after the first
// byte is not turned into a status the client can no longer get.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
