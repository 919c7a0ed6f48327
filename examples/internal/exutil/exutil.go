package exutil

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/nodekit/nodekit"
)

// kubeconfig is the part of a kubeconfig the examples read (one cluster,
// one token user), without clientcmd.
type kubeconfig struct {
	Clusters []struct {
		Cluster struct {
			Server                   string `json:"server"`
			CertificateAuthority     string `json:"certificate-authority"`
			CertificateAuthorityData []byte `json:"certificate-authority-data"`
		} `json:"cluster"`
	} `json:"clusters"`
	Users []struct {
		User struct {
			Token string `json:"token"`
		} `json:"user"`
	} `json:"users"`
}

// RestConfig builds the client configuration from a kubeconfig file (one
// cluster with a server, one user with a token; a relative CA path is
// relative to the file) or from server, token and ca. Calls time out after
// 30s; callers may change that.
func RestConfig(kubeconfigPath, server, token, ca string) (*rest.Config, error) {
	if kubeconfigPath != "" {
		if server != "" || token != "" {
			return nil, errors.New("give either --kubeconfig or --server/--token/--ca")
		}
		data, err := os.ReadFile(kubeconfigPath)
		if err != nil {
			return nil, err
		}
		var kc kubeconfig
		if err := yaml.Unmarshal(data, &kc); err != nil {
			return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfigPath, err)
		}
		if len(kc.Clusters) != 1 || len(kc.Users) != 1 || kc.Clusters[0].Cluster.Server == "" || kc.Users[0].User.Token == "" {
			return nil, fmt.Errorf("kubeconfig %s: want one cluster with a server and one user with a token", kubeconfigPath)
		}
		c := kc.Clusters[0].Cluster
		caFile := c.CertificateAuthority
		if caFile != "" && !filepath.IsAbs(caFile) {
			caFile = filepath.Join(filepath.Dir(kubeconfigPath), caFile)
		}
		return &rest.Config{
			Host:            c.Server,
			BearerToken:     kc.Users[0].User.Token,
			TLSClientConfig: rest.TLSClientConfig{CAFile: caFile, CAData: c.CertificateAuthorityData},
			Timeout:         30 * time.Second,
		}, nil
	}
	if server == "" || token == "" {
		return nil, errors.New("--kubeconfig, or --server and --token (and --ca), are required")
	}
	return &rest.Config{
		Host:            server,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAFile: ca},
		Timeout:         30 * time.Second,
	}, nil
}

// Row is one line of the pod table.
type Row struct{ Pod, Source, Phase, Ready string }

// Rows lists the agent's pods with their source, phase and ready
// containers, sorted by namespace/name.
func Rows(agent *nodekit.Agent) []Row {
	var out []Row
	for _, pod := range agent.Pods() {
		st, ok := agent.StatusManager().GetPodStatus(pod.UID)
		if !ok {
			st.Phase = v1.PodPending
		}
		ready := 0
		for _, cs := range st.ContainerStatuses {
			if cs.Ready {
				ready++
			}
		}
		out = append(out, Row{
			Pod:    pod.Namespace + "/" + pod.Name,
			Source: pod.Annotations["kubernetes.io/config.source"],
			Phase:  string(st.Phase),
			Ready:  fmt.Sprintf("%d/%d", ready, len(pod.Spec.Containers)),
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Pod < out[j].Pod })
	return out
}

// Table writes rows as an aligned table.
func Table(w io.Writer, rs []Row) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POD\tSOURCE\tPHASE\tREADY")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Pod, r.Source, r.Phase, r.Ready)
	}
	if len(rs) == 0 {
		fmt.Fprintln(tw, "(no pods)")
	}
	tw.Flush()
}

// Show prints the pod table whenever it changes (checked every second)
// until ctx ends or the agent stops.
func Show(ctx context.Context, agent *nodekit.Agent, out io.Writer) {
	select {
	case <-agent.Ready():
	case <-ctx.Done():
		return
	case <-agent.Done():
		return
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	last := ""
	for {
		var sb strings.Builder
		Table(&sb, Rows(agent))
		if sb.String() != last {
			fmt.Fprintf(out, "%s\n%s\n", time.Now().Format("15:04:05"), sb.String())
			last = sb.String()
		}
		select {
		case <-ctx.Done():
			return
		case <-agent.Done():
			return
		case <-tick.C:
		}
	}
}
