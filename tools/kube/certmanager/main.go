// Command cert-manager-controller runs cert-manager's own controllers out of cluster against
// one API server: the Certificate controllers, the CertificateRequest approver and the CA and
// SelfSigned issuers, and the Issuer and ClusterIssuer controllers. cert-manager's published
// controller command lives in a nested module that no module proxy serves; everything it
// runs is in the root module, which this launcher imports and starts the way that command
// does (one context factory, each controller's constructor, then the shared informers).
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	"github.com/cert-manager/cert-manager/pkg/controller"
	logf "github.com/cert-manager/cert-manager/pkg/logs"

	// Each package registers its controller (or issuer) from init().
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	_ "github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	_ "github.com/cert-manager/cert-manager/pkg/controller/issuers"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
)

// The controllers run unless --controllers names others: everything a CA or SelfSigned
// issuer needs to turn a Certificate into a Secret.
const defaultControllers = "certificates-issuing,certificates-key-manager,certificates-readiness," +
	"certificates-request-manager,certificates-revision-manager,certificates-trigger," +
	"certificaterequests-approver,certificaterequests-issuer-ca," +
	"certificaterequests-issuer-selfsigned,issuers,clusterissuers"

const workersPerController = 5

func main() {
	kubeconfig := flag.String("kubeconfig", "", "path to the kubeconfig of the API server to serve (required)")
	namespace := flag.String("namespace", "", "serve one namespace only (default: all)")
	clusterResourceNamespace := flag.String("cluster-resource-namespace", "cert-manager",
		"the namespace that holds the Secrets ClusterIssuers refer to")
	controllers := flag.String("controllers", defaultControllers, "comma-separated controllers to run")
	healthAddr := flag.String("health-addr", "127.0.0.1:9403",
		"where /healthz answers 200 once every informer has synced")
	flag.Parse()
	if *kubeconfig == "" {
		fmt.Fprintln(os.Stderr, "cert-manager-controller: --kubeconfig is required")
		os.Exit(2)
	}
	klog.InitFlags(nil)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx = logf.NewContext(ctx, logf.Log, "controller")
	log := logf.FromContext(ctx)

	factory, err := controller.NewContextFactory(ctx, controller.ContextOptions{
		Kubeconfig:         *kubeconfig,
		KubernetesAPIQPS:   50,
		KubernetesAPIBurst: 100,
		Namespace:          *namespace,
		IssuerOptions: controller.IssuerOptions{
			ClusterResourceNamespace: *clusterResourceNamespace,
		},
		CertificateOptions: controller.CertificateOptions{
			CertificateRequestMinimumBackoffDuration: time.Hour,
			CertificateRequestMaximumBackoffDuration: 32 * time.Hour,
		},
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "cert-manager-controller: %v\n", err)
		os.Exit(1)
	}

	known := controller.Known()
	var wg sync.WaitGroup
	for _, name := range strings.Split(*controllers, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		if *namespace != "" && name == "clusterissuers" {
			continue // a namespaced install serves no ClusterIssuer, as upstream's command
		}
		construct, ok := known[name]
		if !ok {
			fmt.Fprintf(os.Stderr, "cert-manager-controller: unknown controller %q\n", name)
			os.Exit(2)
		}
		iface, err := construct(factory)
		if err != nil {
			fmt.Fprintf(os.Stderr, "cert-manager-controller: %s: %v\n", name, err)
			os.Exit(1)
		}
		wg.Add(1)
		go func(name string, iface controller.Interface) {
			defer wg.Done()
			log.Info("starting controller", "controller", name)
			if err := iface.Run(workersPerController, ctx); err != nil {
				log.Error(err, "controller stopped", "controller", name)
				stop()
			}
		}(name, iface)
	}

	// The contexts every controller built share these factories; the informers start once
	// all controllers have asked for theirs.
	shared, err := factory.Build("informers")
	if err != nil {
		fmt.Fprintf(os.Stderr, "cert-manager-controller: %v\n", err)
		os.Exit(1)
	}
	shared.SharedInformerFactory.Start(ctx.Done())
	shared.KubeSharedInformerFactory.Start(ctx.Done())
	shared.HTTP01ResourceMetadataInformersFactory.Start(ctx.Done())

	var synced atomic.Bool
	http.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if !synced.Load() {
			http.Error(w, "informers not synced", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	health := &http.Server{Addr: *healthAddr, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := health.ListenAndServe(); err != nil && err != http.ErrServerClosed {
			log.Error(err, "health endpoint stopped")
			stop()
		}
	}()
	shared.SharedInformerFactory.WaitForCacheSync(ctx.Done())
	shared.KubeSharedInformerFactory.WaitForCacheSync(ctx.Done())
	synced.Store(true)
	log.Info("controllers started")
	<-ctx.Done()
	_ = health.Close()
	wg.Wait()
	logf.FlushLogs()
}
