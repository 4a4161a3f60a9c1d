/*
 * kubeconfig.c - fuzz target: kubeconfig YAML as the operator reads it
 * (operator/kubeconfig.c gaz_kube_config_parse on libyaml: contexts,
 * clusters, users, base64 *-data fields), for the current context and for
 * a named one. Pure: files named in it are not opened at parse time.
 *
 * Input: the kubeconfig text.
 */
#include "fuzz.h"

#include "operator/kube.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const contexts[] = {NULL, "test", "kind-gazette"};

	for (size_t i = 0; i < sizeof(contexts) / sizeof(contexts[0]); i++) {
		struct gaz_kube_config c = {0};
		struct gaz_status st = {0};
		if (gaz_kube_config_parse((const char *)data, size, "/etc/kube", contexts[i], &c, &st) == 0)
			gaz_kube_config_release(&c);
	}
	return 0;
}
