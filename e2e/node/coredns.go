// CoreDNS for the kind node's preload, with only the plugins kubeadm's
// Corefile uses (errors, health, ready, kubernetes, prometheus metrics,
// forward, cache, loop, reload, loadbalance) plus log, hosts, rewrite and
// whoami, so that no cloud SDK is compiled in. scripts/images.sh builds it
// in a throwaway module that requires github.com/coredns/coredns at
// kubeadm's CoreDNS tag. Importing dnsserver keeps CoreDNS's own plugin
// order (its full directive list); plugins not linked are just absent.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/hosts"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
	_ "github.com/coredns/coredns/plugin/rewrite"
	_ "github.com/coredns/coredns/plugin/whoami"
)

var _ = dnsserver.Directives

func main() { coremain.Run() }
