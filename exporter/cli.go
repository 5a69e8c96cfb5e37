package exporter

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
)

// Main is the fanout-eventer command: it parses args (without the program
// name), loads and validates the configuration, and calls [Run] until ctx
// ends. It returns the process's exit code: 0 after a clean shutdown, 1 on
// a runtime error (including a lost Lease), 2 on bad flags or
// configuration (reported before anything starts).
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fl, err := parseFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	cfg, err := LoadConfig(fl.config)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	if p := cfg.FileProblems(); len(p) > 0 {
		fmt.Fprintln(stderr, &ConfigError{File: fl.config, Problems: p, Warnings: cfg.Warnings})
		return 2
	}
	if err := fl.apply(cfg); err != nil {
		if !fl.checkOnly || !errors.Is(err, errNoLeaseNamespace) {
			fmt.Fprintln(stderr, err)
			return 2
		}
		// Where the configuration is checked (CI, a workstation) is
		// not where it runs: the pod's namespace is known there.
		cfg.Warnings = append(cfg.Warnings, err.Error()+" when it runs; none is known here")
	}
	cfg.Warnings = append(cfg.Warnings, fl.notes...)
	if fl.checkOnly {
		checkOnly(fl.config, cfg, stdout, stderr)
		return 0
	}
	log := newLogger(cfg, stderr)
	routeKlog(log)
	for _, w := range cfg.Warnings {
		log.Warn("configuration " + fl.config + ": " + w)
	}
	if err := run(ctx, fl, cfg, log); err != nil {
		log.Error("exiting", "err", err)
		return 1
	}
	return 0
}

// apply sets what the flags override in cfg, and the leader election cfg
// asks for in fl.
func (f *flags) apply(cfg *Config) error {
	if f.api != "" {
		cfg.API = f.api
	}
	if f.namespace != "" {
		cfg.Namespace = f.namespace
	}
	if cfg.API != CoreV1 && cfg.API != EventsV1 {
		return fmt.Errorf("--events-api: unknown API %q (want %q or %q)", cfg.API, CoreV1, EventsV1)
	}
	return f.applyLeaderElection(cfg.LeaderElection)
}

// checkOnly reports a valid configuration and its warnings.
func checkOnly(name string, cfg *Config, stdout, stderr io.Writer) {
	for _, w := range cfg.Warnings {
		fmt.Fprintf(stderr, "%s: warning: %s\n", name, w)
	}
	fmt.Fprintf(stdout, "%s: start: %s\n", name, cfg.StartNote())
	fmt.Fprintf(stdout, "%s: records: %s\n", name, cfg.CompatNote())
	fmt.Fprintf(stdout, "%s: valid, %d receivers, %d warnings\n", name, len(cfg.Receivers), len(cfg.Warnings))
}

type flags struct {
	config, kubeconfig, listen, api, namespace string
	leaderElect                                bool
	leaseNamespace, leaseName, identity        string
	leaseNameSet                               bool
	checkOnly                                  bool
	// notes are warnings about how the flags override the configuration.
	notes []string
}

func parseFlags(args []string, stderr io.Writer) (*flags, error) {
	var f flags
	fs := flag.NewFlagSet("fanout-eventer", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.config, "config", "", "configuration file (YAML; required)")
	fs.StringVar(&f.config, "conf", "", "the same as --config (kubernetes-event-exporter's name)")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster, else $KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&f.listen, "listen", ":9102", "address for /metrics, /healthz and /readyz (also served as /-/healthy and /-/ready) and the live view /debug/fanout (empty: none)")
	fs.StringVar(&f.listen, "metrics-address", ":9102", "the same as --listen (kubernetes-event-exporter's name; its default is :2112)")
	fs.StringVar(&f.api, "events-api", "", `Event API to watch, "v1" or "events.k8s.io/v1" (overrides the configuration's api)`)
	fs.StringVar(&f.namespace, "namespace", "", "watch only this namespace (overrides the configuration)")
	fs.BoolVar(&f.leaderElect, "leader-elect", false, "lead on a Lease, so that only one of several replicas exports")
	fs.StringVar(&f.leaseNamespace, "leader-elect-namespace", os.Getenv("POD_NAMESPACE"), "namespace of the Lease (default $POD_NAMESPACE)")
	fs.StringVar(&f.leaseName, "leader-elect-name", "fanout-eventer", "name of the Lease")
	host, _ := os.Hostname()
	fs.StringVar(&f.identity, "leader-elect-identity", host, "this replica's identity in the Lease (default the host name)")
	fs.BoolVar(&f.checkOnly, "check-config", false, "validate the configuration and exit")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if f.config == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: fanout-eventer --config FILE [flags]")
		fs.PrintDefaults()
		return nil, errors.New("bad usage")
	}
	f.leaseNameSet = isSet(fs, "leader-elect-name")
	if f.leaderElect && f.leaseNamespace == "" {
		f.leaseNamespace = podNamespace()
	}
	if f.leaderElect && (f.leaseNamespace == "" || f.identity == "") {
		fmt.Fprintln(stderr, "--leader-elect needs --leader-elect-namespace (or $POD_NAMESPACE) and an identity")
		return nil, errors.New("bad usage")
	}
	return &f, nil
}

func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// serviceAccountNamespace is where a pod finds its namespace.
var serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// podNamespace returns the pod's namespace from its service account, as
// kubernetes-event-exporter finds it, or "".
func podNamespace() string {
	b, err := os.ReadFile(serviceAccountNamespace)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// applyLeaderElection turns leader election on when the configuration's
// leaderElection (kubernetes-event-exporter's) enables it; the flags win
// over leaderElectionID.
func (f *flags) applyLeaderElection(le LeaderElectionConfig) error {
	if !le.Enabled {
		return nil
	}
	if !f.leaderElect && f.leaseNamespace == "" {
		f.leaseNamespace = podNamespace()
	}
	f.leaderElect = true
	if le.LeaderElectionID != "" && !f.leaseNameSet {
		f.leaseName = le.LeaderElectionID
	}
	if le.LeaderElectionID != "" && f.leaseNameSet && le.LeaderElectionID != f.leaseName {
		f.notes = append(f.notes, fmt.Sprintf("leaderElection.leaderElectionID %s: the Lease is %s "+
			"(--leader-elect-name wins)", le.LeaderElectionID, f.leaseName))
	}
	if f.leaseNamespace == "" || f.identity == "" {
		return errNoLeaseNamespace
	}
	return nil
}

// errNoLeaseNamespace is the error of a configuration that enables leader
// election where the Lease's namespace (or this replica's identity) is not
// known; --check-config makes it a warning.
var errNoLeaseNamespace = errors.New("leaderElection.enabled needs the pod's namespace " +
	"(its service account, $POD_NAMESPACE or --leader-elect-namespace) and an identity")

func newLogger(cfg *Config, w io.Writer) *slog.Logger {
	if cfg.LogLevel == LogDisabled {
		return slog.New(slog.DiscardHandler)
	}
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.LogLevel))
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// routeKlog sends what client-go logs through klog (leader election,
// request retries, its own errors) to log, so that a JSON log stream holds
// no klog text lines.
func routeKlog(log *slog.Logger) {
	klog.SetSlogLogger(log.With("logger", "client-go"))
}

func run(ctx context.Context, fl *flags, cfg *Config, log *slog.Logger) error {
	rc, err := restConfig(fl.kubeconfig)
	if err != nil {
		return err
	}
	rc.QPS, rc.Burst = 20, 40
	if cfg.KubeQPS > 0 {
		rc.QPS = cfg.KubeQPS
	}
	if cfg.KubeBurst > 0 {
		rc.Burst = cfg.KubeBurst
	}
	rc.UserAgent = "fanout-eventer"
	// Protobuf, as Kubernetes components use for built-in types: smaller
	// and cheaper to decode than JSON.
	rc.ContentType = "application/vnd.kubernetes.protobuf"
	rc.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	if err := checkAccess(ctx, client, accessNeeds(cfg, fl), log); err != nil {
		return err
	}
	opts := Options{Config: cfg, Client: client, Logger: log}
	if !cfg.OmitLookup {
		if opts.Dynamic, opts.Discovery, err = lookupClients(rc); err != nil {
			return err
		}
	}
	if fl.listen != "" {
		l, err := net.Listen("tcp", fl.listen)
		if err != nil {
			return err
		}
		opts.Listener = l
	}
	if fl.leaderElect {
		opts.LeaderElection = &LeaderElection{Namespace: fl.leaseNamespace, Name: fl.leaseName, Identity: fl.identity}
	}
	return Run(ctx, opts)
}

// lookupClients returns the clients of involved-object lookups: with their
// own rate limiter (the QPS and burst of the configuration), so that
// lookups do not slow the watch, and a timeout on every request, so that
// discovery too takes a bounded time.
func lookupClients(rc *rest.Config) (dynamic.Interface, discovery.DiscoveryInterface, error) {
	lc := rest.CopyConfig(rc)
	lc.Timeout = 2 * DefaultLookupTimeout
	dyn, err := dynamic.NewForConfig(lc)
	if err != nil {
		return nil, nil, err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(lc)
	if err != nil {
		return nil, nil, err
	}
	return dyn, disc, nil
}

// restConfig returns the client configuration: from the kubeconfig file if
// given, else in-cluster, else the default loading rules.
func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		if rc, err := rest.InClusterConfig(); err == nil {
			return rc, nil
		}
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
}
