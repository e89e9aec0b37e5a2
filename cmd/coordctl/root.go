package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Where the connection settings come from, strongest first: flags, the
// environment, the config file, the defaults.
const (
	envServers   = "COORD_SERVERS"
	envZKServers = "COORD_ZK_SERVERS"
	envConfig    = "COORDCTL_CONFIG"
	envUser      = "COORDCTL_USER"

	defaultServers   = "127.0.0.1:2182" // cmd/coord's default -grpc-addr
	defaultZKServers = "127.0.0.1:2181" // cmd/coord's default -zk-addr
)

// fileConfig is the optional JSON config file (--config, COORDCTL_CONFIG,
// or ~/.config/coordctl/config.json when it exists).
type fileConfig struct {
	Servers        []string `json:"servers"`
	ZKServers      []string `json:"zk_servers"`
	DialTimeout    string   `json:"dial_timeout"`
	CommandTimeout string   `json:"command_timeout"`
	Output         string   `json:"output"`
	User           string   `json:"user"` // digest identity user:password
}

// globals are the settings every command shares.
type globals struct {
	servers        []string
	zkServers      []string
	dialTimeout    time.Duration
	commandTimeout time.Duration
	output         string
	user           string

	configFile string
	tls        tlsFlags
	tlsConf    *tls.Config // from the TLS flags; nil: plaintext

	stdin          io.Reader
	stdout, stderr io.Writer
}

// tlsFlags turn TLS on for gRPC (sessions and the Admin service).
type tlsFlags struct {
	cacert, cert, key string
	insecureSkip      bool
	enable            bool
}

func (t tlsFlags) any() bool {
	return t.enable || t.cacert != "" || t.cert != "" || t.key != "" || t.insecureSkip
}

// config builds the client TLS configuration: the servers verified against
// --cacert (or the system's roots), the client certificate presented if
// given (mutual TLS).
func (t tlsFlags) config() (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: t.insecureSkip}
	if t.cacert != "" {
		pem, err := os.ReadFile(t.cacert)
		if err != nil {
			return nil, fmt.Errorf("--cacert: %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--cacert %s holds no PEM certificate", t.cacert)
		}
	}
	if (t.cert == "") != (t.key == "") {
		return nil, errors.New("--cert and --key go together")
	}
	if t.cert != "" {
		pair, err := tls.LoadX509KeyPair(t.cert, t.key)
		if err != nil {
			return nil, fmt.Errorf("--cert/--key: %w", err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c, nil
}

// run builds the command tree, runs args and returns the exit code.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	g := &globals{stdin: stdin, stdout: stdout, stderr: stderr}
	root := newRoot(g)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	if strings.HasPrefix(err.Error(), "unknown command") {
		err = usageError{unknownFlag(root, args, err)}
	}
	code := exitCode(err)
	fmt.Fprintf(stderr, "coordctl: %s\n", oneLine(describe(err)))
	return code
}

// unknownFlag explains an unknown command that an unknown flag before it
// caused. Cobra's command search takes the word after a flag it does not
// know for that flag's value, so "coordctl --tsl ls /" reads as the
// unknown command "/"; parsing the root's flags up to that word finds the
// flag to blame. Otherwise err stands.
func unknownFlag(root *cobra.Command, args []string, err error) error {
	var word string
	if _, serr := fmt.Sscanf(err.Error(), "unknown command %q", &word); serr != nil {
		return err
	}
	if i := slices.Index(args, word); i > 0 {
		if ferr := root.ParseFlags(args[:i]); ferr != nil {
			return ferr
		}
	}
	return err
}

func newRoot(g *globals) *cobra.Command {
	root := &cobra.Command{
		Use:   "coordctl",
		Short: "Operate a coord cluster: znodes, watches, membership, health",
		Long: `coordctl talks to a coord cluster over gRPC. It covers zkCli.sh's znode commands
and etcdctl's operator commands in one binary.

Servers come from --servers, then $COORD_SERVERS, then "servers" in the config
file (--config, $COORDCTL_CONFIG or ~/.config/coordctl/config.json), then
127.0.0.1:2182.

The commands that reveal data or sessions or change the cluster (sessions,
sessions kill, snapshot save, snapshot take, endpoint hashkv, add-voter,
add-observer, promote, remove, move-leader) need an admin identity: --user
with the servers' -super-digest user and password ($COORDCTL_USER), or
--cert/--key with a client certificate listed in their -admin-x509.`,
		Example: `  coordctl --servers 127.0.0.1:2182 ls -R /
  COORD_SERVERS=10.0.0.1:2182,10.0.0.2:2182 coordctl status -o table
  coordctl create /app '{"v":1}' && coordctl get --stat /app
  coordctl --user super:secret sessions`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return g.resolve(cmd.Flags())
		},
	}
	pf := root.PersistentFlags()
	pf.StringSlice("servers", nil, "gRPC addresses of coord servers, host:port,... (env "+envServers+")")
	pf.StringSlice("zk-servers", nil, "ZooKeeper-protocol addresses, for 4lw (env "+envZKServers+")")
	pf.Duration("dial-timeout", 3*time.Second, "how long to try to reach a server")
	pf.Duration("command-timeout", 30*time.Second, "how long a whole command may take (watch: no limit unless given)")
	pf.StringP("output", "o", "text", "output format: text, json or table")
	pf.String("user", "", "digest identity user:password: the session authenticates as it, and Admin calls send it as the admin identity (the servers' -super-digest user) (env "+envUser+")")
	pf.StringVar(&g.configFile, "config", "", "JSON config file (env "+envConfig+")")
	pf.BoolVar(&g.tls.enable, "tls", false, "use TLS for gRPC (sessions and admin) and four-letter words; implied by the other TLS flags")
	pf.StringVar(&g.tls.cacert, "cacert", "", "CA bundle to verify servers (TLS)")
	pf.StringVar(&g.tls.cert, "cert", "", "client certificate (TLS); with a subject in the servers' -admin-x509 it is an admin identity")
	pf.StringVar(&g.tls.key, "key", "", "client key (TLS)")
	pf.BoolVar(&g.tls.insecureSkip, "insecure-skip-tls-verify", false, "skip server certificate checks (TLS)")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })

	root.AddGroup(&cobra.Group{ID: "data", Title: "Znode commands:"},
		&cobra.Group{ID: "cluster", Title: "Cluster commands:"})
	for _, c := range dataCommands(g) {
		c.GroupID = "data"
		root.AddCommand(c)
	}
	for _, c := range clusterCommands(g) {
		c.GroupID = "cluster"
		root.AddCommand(c)
	}
	wrapArgs(root)
	return root
}

// wrapArgs makes every command's argument-count error a usageError.
func wrapArgs(c *cobra.Command) {
	if orig := c.Args; orig != nil {
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := orig(cmd, args); err != nil {
				return usageError{err}
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		wrapArgs(sub)
	}
}

// resolve fills g from flags, the environment and the config file.
func (g *globals) resolve(fs *pflag.FlagSet) error {
	if g.tls.any() {
		c, err := g.tls.config()
		if err != nil {
			return usageError{err}
		}
		g.tlsConf = c
	}
	var fc fileConfig
	path := g.configFile
	if path == "" {
		path = os.Getenv(envConfig)
	}
	explicit := path != ""
	if !explicit {
		if dir, err := os.UserConfigDir(); err == nil {
			path = filepath.Join(dir, "coordctl", "config.json")
		}
	}
	if path != "" {
		b, err := os.ReadFile(path)
		switch {
		case err == nil:
			if err := json.Unmarshal(b, &fc); err != nil {
				return usageError{fmt.Errorf("config file %s: %v", path, err)}
			}
		case explicit || !errors.Is(err, os.ErrNotExist):
			return usageError{fmt.Errorf("config file: %v", err)}
		}
	}

	list := func(flag, env string, file []string, def string) []string {
		if fs.Changed(flag) {
			v, _ := fs.GetStringSlice(flag)
			return cleanList(v)
		}
		if e := os.Getenv(env); e != "" {
			return cleanList(strings.Split(e, ","))
		}
		if len(file) > 0 {
			return cleanList(file)
		}
		return []string{def}
	}
	g.servers = list("servers", envServers, fc.Servers, defaultServers)
	g.zkServers = list("zk-servers", envZKServers, fc.ZKServers, defaultZKServers)
	if len(g.servers) == 0 {
		return usageError{errors.New("--servers is empty")}
	}

	dur := func(flag, file string) (time.Duration, error) {
		v, _ := fs.GetDuration(flag)
		if fs.Changed(flag) || file == "" {
			return v, nil
		}
		d, err := time.ParseDuration(file)
		if err != nil {
			return 0, usageError{fmt.Errorf("config file: %s: %v", strings.ReplaceAll(flag, "-", "_"), err)}
		}
		return d, nil
	}
	var err error
	if g.dialTimeout, err = dur("dial-timeout", fc.DialTimeout); err != nil {
		return err
	}
	if g.commandTimeout, err = dur("command-timeout", fc.CommandTimeout); err != nil {
		return err
	}
	if g.dialTimeout <= 0 || g.commandTimeout <= 0 {
		return usageError{errors.New("--dial-timeout and --command-timeout must be positive")}
	}
	g.output, _ = fs.GetString("output")
	if !fs.Changed("output") && fc.Output != "" {
		g.output = fc.Output
	}
	switch g.output {
	case "text", "json", "table":
	default:
		return usageError{fmt.Errorf("--output %q: want text, json or table", g.output)}
	}
	g.user, _ = fs.GetString("user")
	if !fs.Changed("user") {
		if e := os.Getenv(envUser); e != "" {
			g.user = e
		} else if fc.User != "" {
			g.user = fc.User
		}
	}
	if g.user != "" && !strings.Contains(g.user, ":") {
		return usageError{errors.New("--user: want user:password")}
	}
	return nil
}

// ctx is the context of one command: bounded by --command-timeout, ended
// early by SIGINT or SIGTERM.
func (g *globals) ctx(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	return context.WithTimeout(cmd.Context(), g.commandTimeout)
}

func cleanList(in []string) []string {
	var out []string
	for _, s := range in {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// oneLine folds a multi-line message onto one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
